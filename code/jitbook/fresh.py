"""Run a measurement in a new Python process and read back the JSON it prints: cold
means a fresh process, and XLA reads its flags once, when a process starts its backend.
"""

import json
import os
import pickle
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from jitbook.guard import OFF, XLA_FLAG, jaxlib_knows_flag
from jitbook.paths import CODE


def python_stdout(
    argv: list[str], what: str, env: dict | None = None, timeout: float | None = None
) -> str:
    """What ``python *argv`` prints in a new process whose environment is ``env``
    (default: this one's); a failure raises with the end of its stderr, named by
    ``what``."""
    out = subprocess.run(
        [sys.executable, *argv],
        env=dict(os.environ) if env is None else env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{out.stderr[-2000:]}")
    return out.stdout


def run_for_json(
    argv: list[str], what: str, env: dict | None = None, timeout: float | None = None
):
    """Run ``python *argv`` in a new process and read the JSON on its last line of
    output; a failure raises with the end of its stderr, named by ``what``."""
    out = python_stdout(argv, what, env, timeout)
    return json.loads(out.strip().splitlines()[-1])


def python_output(code: str, env: dict | None = None) -> str:
    """What ``python -c code`` prints in a new process; ``env`` as for
    ``python_stdout``."""
    return python_stdout(["-c", code], "python -c", env)


def in_fresh_process(module: str, *args: str, guarded: bool) -> dict:
    """Run ``python -m jitbook.<module> *args`` in a new process, with or without the
    guard's flag, and return the JSON it prints last.

    Taught in Why compile?, What the guard costs.
    """
    env = dict(os.environ)
    flags = [f for f in env.get("XLA_FLAGS", "").split() if f != XLA_FLAG]
    guard = [XLA_FLAG] if guarded and jaxlib_knows_flag() else []  # as import jitbook
    env["XLA_FLAGS"] = " ".join(flags + guard)
    env[OFF] = "on" if guarded else "off"
    env["PYTHONPATH"] = os.pathsep.join(
        [str(CODE), *filter(None, [env.get("PYTHONPATH")])]
    )
    return run_for_json(
        ["-m", f"jitbook.{module}", *map(str, args)],
        f"python -m jitbook.{module} {' '.join(map(str, args))}",
        env=env,
    )


def run_cold(fn: Callable, *args, **kwargs):
    """``fn(*args, **kwargs)`` in a new Python process, where JAX's caches start empty.

    A cold measurement runs here, never by clearing or flooding the caches of the
    process that asks for it (a reader's kernel keeps what it compiled). ``fn`` is a
    module-level function, the arguments picklable (arrays are), the result JSON
    (numbers, strings, lists, dicts). The new process has the guard as this one has.
    """
    with tempfile.TemporaryDirectory() as folder:
        call = Path(folder) / "call.pickle"
        call.write_bytes(pickle.dumps((fn, args, kwargs)))
        return in_fresh_process(
            "fresh", str(call), guarded=os.environ.get(OFF) != "off"
        )


def main(argv: list[str] | None = None) -> None:
    """The new process's side of ``run_cold``: make the pickled call, print JSON."""
    import jitbook  # noqa: F401  (the guard, unless JITBOOK_GUARD=off)

    (path,) = sys.argv[1:] if argv is None else argv
    fn, args, kwargs = pickle.loads(Path(path).read_bytes())
    print(json.dumps(fn(*args, **kwargs)))


if __name__ == "__main__":
    main()
