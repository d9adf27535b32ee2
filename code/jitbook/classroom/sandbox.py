"""The grading kernel's confinement: bubblewrap, budgets and a scrubbed environment.

In the ``bwrap`` sandbox the kernel runs as uid 65534 in a user namespace of its own
with every capability dropped, so it cannot remount the read-only book, venv or
system; /tmp is a size-limited tmpfs, there is no network, and only its work folder
is writable. One student's processes share one memory, disk and output budget
(``Budget``), watched from outside by ``jitbook.classroom.session``.
"""

import dataclasses
import functools
import os
import subprocess
import sys
from pathlib import Path

from jitbook.site import harness

MEMORY_LIMIT = 4.0  # GiB per student, all processes together; JAX starts in under 2
DISK_LIMIT = 1.0  # GiB per student: the work folder and /tmp, each
OUTPUT_LIMIT = 200_000  # characters of output one cell keeps; the rest is cut
COLLECT_LIMIT = 32_000_000  # characters the collector's evidence may take
NOTEBOOK_OUTPUT_LIMIT = 4_000_000  # characters of output all cells keep together
MESSAGE_LIMIT = 48 * 2**20  # bytes of one message part from the kernel
CHECK_MARGIN = 10.0  # seconds a check may run past its limit before the kill
MAX_RESTARTS = 5
SANDBOXES = ("auto", "bwrap", "none")
INSIDE_UID = 65534  # nobody: the kernel is never uid 0 inside the sandbox
# Address space per process, the largest file, then become the kernel (or bwrap).
LIMITER = (
    "import os, resource, sys; m, f = int(sys.argv[1]), int(sys.argv[2]); "
    "resource.setrlimit(resource.RLIMIT_AS, (m, m)); "
    "resource.setrlimit(resource.RLIMIT_FSIZE, (f, f)); "
    "resource.setrlimit(resource.RLIMIT_CORE, (0, 0)); "
    "os.environ.pop('JPY_PARENT_PID', None); os.execvp(sys.argv[3], sys.argv[3:])"
)
KERNEL_ENV = ("PATH", "LANG", "LC_ALL", "JAX_PLATFORMS", "TZ")
# Readable by root only, and no business of a student's: masked inside the sandbox.
MASKED = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/ssh")
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc")


def sandbox_mode(requested: str = "auto") -> str:
    """``bwrap`` when bubblewrap works here (or was asked for), else ``none``."""
    if requested not in SANDBOXES:
        raise ValueError(
            f"--sandbox must be one of {', '.join(SANDBOXES)}, not {requested!r}."
        )
    if requested == "none":
        return "none"
    works = _bwrap_works()
    if requested == "bwrap" and not works:
        raise ValueError(
            "--sandbox bwrap: bubblewrap is not installed or cannot make namespaces "
            "here; install it (Debian: apt-get install bubblewrap) or pass --sandbox "
            "none."
        )
    return "bwrap" if works else "none"


@functools.cache
def _bwrap_works() -> bool:
    import shutil

    if shutil.which("bwrap") is None:
        return False
    probe = ["bwrap", "--ro-bind", "/", "/", *_identity(), "--unshare-pid"]
    probe += ["--unshare-net", "true"]
    return subprocess.run(probe, capture_output=True).returncode == 0


def _identity() -> list[str]:
    """No capabilities, and uid/gid 65534 in a user namespace of the kernel's own."""
    ids = ["--unshare-user", "--uid", str(INSIDE_UID), "--gid", str(INSIDE_UID)]
    return ids + ["--cap-drop", "ALL"]


def _read_only_paths() -> list[str]:
    """What a sandboxed kernel must read: Python, the venv, the package, its data."""
    import jitbook

    code = Path(jitbook.__file__).resolve().parents[1]
    paths = {
        sys.prefix,
        sys.base_prefix,
        str(Path(sys.executable).resolve().parents[1]),
        str(code),
        str(harness.ROOT / "data"),
    }
    return sorted(
        p
        for p in paths
        if Path(p).exists() and not any(p == s or p.startswith(s + "/") for s in SYSTEM)
    )


def trusted_paths() -> list[Path]:
    """The code the grader trusts: the package (checkers, sealed grader, tools)."""
    import jitbook

    return [Path(jitbook.__file__).resolve().parent]


def bwrap_prefix(
    workdir: Path, private: Path, env: dict[str, str], tmp_bytes: int
) -> list[str]:
    """bubblewrap's command: a read-only system, a size-limited private /tmp and /proc,
    no network, no capabilities, only ``workdir`` (and the sockets' folder) writable.
    """
    args = ["bwrap", "--die-with-parent", "--new-session", "--unshare-pid"]
    args += ["--unshare-ipc", "--unshare-uts", "--unshare-net", *_identity()]
    args += ["--proc", "/proc", "--dev", "/dev"]
    args += ["--size", str(tmp_bytes), "--tmpfs", "/tmp"]
    for top in SYSTEM:
        if Path(top).is_symlink():
            args += ["--symlink", os.readlink(top), top]
        elif Path(top).is_dir():
            args += ["--ro-bind", top, top]
    for path in MASKED:
        if Path(path).is_dir():
            args += ["--tmpfs", path, "--remount-ro", path]
        elif Path(path).exists():
            args += ["--ro-bind", "/dev/null", path]
    for path in _read_only_paths():
        args += ["--ro-bind", path, path]
    # The checkers and their references stay outside: check() cells find a stand-in.
    args += ["--ro-bind", str(_stand_in(private)), str(_package() / "exercises")]
    args += ["--ro-bind", str(private), str(private)]
    # No network: the kernel talks to the grader over Unix sockets in their own folder.
    sockets = str(private.parent / "sockets")
    # The work folder is a size-limited filesystem of the sandbox's own: nothing the
    # student writes reaches the grader's disk, and nothing is left behind.
    args += [
        "--bind",
        sockets,
        sockets,
        "--size",
        str(tmp_bytes),
        "--tmpfs",
        str(workdir),
    ]
    args += ["--chdir", str(workdir), "--clearenv"]
    for key, value in env.items():
        args += ["--setenv", key, value]
    return args + ["--"]


STAND_IN = '''"""The checkers are not in the grading sandbox: the grader judges
what your answers produce after the notebook has run."""


def check(exercise_id, answer=None, **options):
    print(f"{exercise_id}: graded after the run, from what your answer produces")
'''


def _package() -> Path:
    import jitbook

    return Path(jitbook.__file__).resolve().parent


def _stand_in(private: Path) -> Path:
    """A package with the one name handouts import from ``jitbook.exercises``."""
    folder = private / "exercises"
    folder.mkdir(exist_ok=True)
    (folder / "__init__.py").write_text(STAND_IN)
    return folder


def kernel_env(workdir: Path, private: Path, extra: dict[str, str]) -> dict[str, str]:
    """The grading kernel's whole environment: none of the grader's variables, and an
    IPython folder the student cannot write (no startup files survive a restart).
    """
    import jitbook

    env = {k: os.environ[k] for k in KERNEL_ENV if k in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    return {
        **env,
        "HOME": str(workdir),
        "TMPDIR": "/tmp",
        "IPYTHONDIR": str(private / "ipython"),
        "PYTHONPATH": str(Path(jitbook.__file__).resolve().parents[1]),
        "MPLBACKEND": "agg",
        "PYTHONDONTWRITEBYTECODE": "1",
        **extra,
    }


@dataclasses.dataclass
class Kernel:
    """How grading kernels start: the sandbox, the budgets and the environment."""

    sandbox: str = "none"
    memory_gib: float = MEMORY_LIMIT
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    disk_gib: float = DISK_LIMIT
    output_chars: int = OUTPUT_LIMIT

    def client(self, nb, workdir: Path, private: Path, timeout: float):
        """An nbclient client whose kernel starts in ``workdir`` in this sandbox."""
        import zmq
        from jupyter_client.manager import AsyncKernelManager

        env = kernel_env(workdir, private, self.env)
        disk = int(self.disk_gib * 2**30)
        limit = [sys.executable, "-c", LIMITER, str(int(self.memory_gib * 2**30))]
        prefix = limit + [str(disk)]
        if self.sandbox == "bwrap":
            prefix += bwrap_prefix(workdir, private, env, disk)

        class Confined(AsyncKernelManager):
            def format_kernel_cmd(self, extra_arguments=None):
                # -P: the work folder is not on sys.path (no shadowing `numpy.py`)
                command = super().format_kernel_cmd(extra_arguments)
                return prefix + [command[0], "-P", "-s", *command[1:]]

            def client(self, **options):
                # Its own context makes its sockets: a larger message is refused by
                # the socket, before it reaches the grader's memory.
                kc = super().client(**options)
                kc.context.setsockopt(zmq.MAXMSGSIZE, MESSAGE_LIMIT)
                return kc

        km = Confined(kernel_name="python3")
        km.connection_file = str(private / "kernel.json")
        # Unix sockets in every mode: bwrap's kernel has no network, and no TCP port
        # two kernels started at once could both pick (see harness.kernel_manager).
        km.transport, km.ip = "ipc", str(private.parent / "sockets" / "kernel")
        client = CappedClient(
            nb,
            km=km,
            timeout=timeout,
            allow_errors=True,
            interrupt_on_timeout=False,
            shutdown_kernel="immediate",
            extra_arguments=[*harness.QUIET_KERNEL, "--HistoryManager.enabled=False"],
        )
        client.cap = self.output_chars
        return client, env


def _client_base():
    from nbclient import NotebookClient

    return NotebookClient


class CappedClient(_client_base()):
    """An nbclient client that keeps at most ``cap`` characters of each cell's
    messages, of every kind (streams, displays, display updates, comms), and at most
    ``total`` for the notebook, and says where it cut: a cell that prints or updates a
    gigabyte costs the grader nothing. A collector's cell may hold ``collect_cap``.
    """

    cap: int = OUTPUT_LIMIT
    collect_cap: int = COLLECT_LIMIT
    total: int = NOTEBOOK_OUTPUT_LIMIT
    collect_cells: frozenset = frozenset()

    def process_message(self, msg, cell, cell_index):
        kind = msg.get("msg_type", "")
        if kind in ("status", "execute_input"):
            return super().process_message(msg, cell, cell_index)
        kept = self.__dict__.setdefault("_kept", {})
        size = _size(msg.get("content", {}))
        used = kept.get(cell_index, 0)
        kept[cell_index] = used + size
        cap = self.collect_cap if cell_index in self.collect_cells else self.cap
        everything = sum(
            min(v, self.cap) for k, v in kept.items() if k not in self.collect_cells
        )
        if used + size <= cap and everything <= self.total:
            return super().process_message(msg, cell, cell_index)
        if used <= cap and not self.__dict__.get("_noted", {}).get(cell_index):
            self.__dict__.setdefault("_noted", {})[cell_index] = True
            note = (
                "[grader] output cut: this cell's output passed "
                f"{min(cap, self.total):,} "
                "characters; the rest is not kept\n"
            )
            cell.outputs.append(_stream(note))
        return None


def _size(content) -> int:
    """About how many characters a message holds, without copying it whole."""
    if isinstance(content, dict):
        return sum(len(str(k)) + _size(v) for k, v in content.items())
    if isinstance(content, list):
        return sum(map(_size, content)) + 1
    return len(content) if isinstance(content, str | bytes) else 8


def _stream(text: str):
    import nbformat

    return nbformat.v4.new_output("stream", name="stderr", text=text)
