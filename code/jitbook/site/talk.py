"""Long work talks: which chapter cell runs and for how long, and timestamps on a
command's output, at least every ``EVERY`` seconds of silence.

A chapter can compute for minutes in one cell; a reader watching ``make book`` or
``python -m jitbook.site run`` should see that it is alive and where it is.
"""

import codecs
import os
import re
import subprocess
import sys
import threading
import time
from typing import TextIO

import nbformat

from jitbook.heartbeat import Heartbeat

EVERY = 10.0  # seconds of silence before a progress line
HEADING = re.compile(r"^#{1,4}\s+(.+?)\s*(?:\{[^}]*\})?\s*$", re.M)


def clock(seconds: float) -> str:
    """Elapsed time as a person reads a stopwatch: ``0:07``, ``5:23``, ``1:02:03``."""
    s = int(seconds)
    hours, minutes = divmod(s // 60, 60)
    return f"{hours}:{minutes:02d}:{s % 60:02d}" if hours else f"{minutes}:{s % 60:02d}"


def _where(nb: nbformat.NotebookNode) -> dict[int, str]:
    """For each code cell (by index in ``nb``): its number among the code cells, its
    line in the .qmd and the heading of the section it is in."""
    code = [
        i
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code" and not c.metadata["jitbook"].get("inline_helper")
    ]
    places, section, number = {}, "", 0
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            headings = HEADING.findall(cell.source)
            section = headings[-1] if headings else section
            continue
        meta = cell.metadata["jitbook"]
        if meta.get("inline_helper"):
            what = "the inline values of the text"
        else:
            number += 1
            what = f"cell {number} of {len(code)} (line {meta['qmd_line']})"
        places[i] = f"{what}, in '{section}'" if section else what
    return places


class CellProgress:
    """nbclient's hook and a heartbeat thread: which cell of a chapter runs, for how
    long, and the chapter's time so far, whenever ``every`` s pass in silence."""

    def __init__(
        self, name: str, nb: nbformat.NotebookNode, out: TextIO, every: float = 0.0
    ):
        self.name, self.out, self.every = name, out, every or EVERY
        self.places = _where(nb)
        self.start = self.cell_start = time.monotonic()
        self.place = "starting the kernel"
        self._heartbeat = Heartbeat(self.every, lambda _: self.say(time.monotonic()))

    def __enter__(self) -> "CellProgress":
        self._heartbeat.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._heartbeat.__exit__(*exc)

    def on_cell_execute(self, cell, cell_index: int) -> None:
        """nbclient calls this as a cell starts."""
        self.place = self.places.get(cell_index, f"cell {cell_index}")
        self.cell_start = time.monotonic()

    def say(self, now: float) -> None:
        """One progress line: where the chapter is, for how long, in all."""
        print(
            f"  {self.name}: {self.place}, running {clock(now - self.cell_start)}; "
            f"{clock(now - self.start)} since the chapter started",
            file=self.out,
            flush=True,
        )


def stamped(
    cmd: list[str], every: float = EVERY, out: TextIO = sys.stdout, **popen
) -> int:
    """Run ``cmd``, each line of its output (stdout and stderr) prefixed by the time
    since it started, and a line saying it is still running after ``every`` s of
    silence; return its exit status. ``popen``: ``cwd``, ``env`` for ``Popen``."""
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **popen
    )
    chunks: list[bytes] = []
    lock = threading.Lock()
    reader = threading.Thread(
        target=_read, args=(proc.stdout, chunks, lock), daemon=True
    )
    reader.start()
    at_line_start, last = True, ""
    writing = threading.Lock()  # the heartbeat writes from its own thread
    # a character split between two reads is decoded whole
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def still_running(silent: float) -> None:
        nonlocal at_line_start
        with writing:
            out.write(
                ("" if at_line_start else "\n")
                + f"[{clock(time.monotonic() - start)}] ... still running "
                f"({clock(silent)} since its last output: {last[:100]})\n"
            )
            out.flush()
            at_line_start = True

    try:
        with Heartbeat(every, still_running) as heartbeat:
            while reader.is_alive() or chunks:
                reader.join(timeout=0.2)
                with lock:
                    data, chunks[:] = b"".join(chunks), []
                if not data:
                    continue
                now = time.monotonic()
                with writing:
                    for piece in decoder.decode(data).splitlines(keepends=True):
                        if at_line_start:
                            out.write(f"[{clock(now - start)}] ")
                        out.write(piece)
                        at_line_start = piece.endswith("\n")
                        last = piece.strip() or last
                    out.flush()
                heartbeat.heard()
    finally:
        if proc.poll() is None:  # interrupted: stop it rather than leave it running
            proc.terminate()
        code = proc.wait()
        proc.stdout.close()
    print(f"[{clock(time.monotonic() - start)}] {cmd[0]} exited with {code}", file=out)
    return code


def _read(stream, chunks: list[bytes], lock: threading.Lock) -> None:
    """Copy what ``stream`` gives, as it comes, into ``chunks``."""
    while data := os.read(stream.fileno(), 65536):
        with lock:
            chunks.append(data)
