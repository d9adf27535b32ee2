"""``python -m jitbook.site``: run chapters (``run``), Quarto's post-render step
(``site``), a command with timestamps (``timed``).

    python -m jitbook.site run tracing                 # one chapter, by name or path
    python -m jitbook.site run --all                   # every chapter in _quarto.yml
    python -m jitbook.site site                        # after quarto render
    python -m jitbook.site timed quarto render         # what `make book` runs

One execution per build: without Quarto, the harness executes the chapters; with Quarto,
``quarto render`` executes each chapter once (``keep-ipynb`` keeps the executed
notebook) and ``site`` turns those notebooks into the downloads.
"""

import argparse
import os
import sys
import time
from pathlib import Path

from jitbook import size
from jitbook.site import talk
from jitbook.site.downloads import run
from jitbook.site.harness import ROOT, SITE, ChapterError, chapter_files
from jitbook.site.post_render import build_site


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m jitbook.site", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run_p = sub.add_parser(
        "run", help="execute chapters and write notebooks to _build/notebooks/"
    )
    run_p.add_argument(
        "chapters",
        nargs="*",
        help="chapter names (tracing, pln-fast) or paths (chapters/tracing.qmd)",
    )
    run_p.add_argument(
        "--all", action="store_true", help="every chapter listed in _quarto.yml"
    )
    site_p = sub.add_parser(
        "site", help="Quarto's post-render step: offline pages, a notebook per chapter"
    )
    site_p.add_argument(
        "site",
        type=Path,
        nargs="?",
        default=Path(os.environ.get("QUARTO_PROJECT_OUTPUT_DIR", SITE)),
    )
    timed_p = sub.add_parser(
        "timed",
        help="run a command, its output stamped with the time since it started, and a "
        f"line after every {talk.EVERY:g} s of silence",
    )
    timed_p.add_argument("cmd", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.command == "timed":
        if not args.cmd:
            parser.error("name a command: python -m jitbook.site timed CMD ...")
        try:
            return talk.stamped(args.cmd)
        except FileNotFoundError:
            print(f"timed: no command {args.cmd[0]!r} on PATH", file=sys.stderr)
            return 127
    if args.command == "site":
        try:
            written = build_site(ROOT / args.site)
        except FileNotFoundError as err:
            print(err, file=sys.stderr)
            return 1
        print(
            f"site: {len(written)} chapter notebooks written to {args.site}/notebooks, "
            "remote scripts removed"
        )
        return 0
    if not (args.all or args.chapters):
        parser.error("name chapters to run, or pass --all\n" + _known())
    try:
        chapters = chapter_files() if args.all else [find(c) for c in args.chapters]
    except FileNotFoundError as err:
        print(err, file=sys.stderr)
        return 2
    sizes = (
        "small problem sizes (JITBOOK_SMALL=1)"
        if size.is_small()
        else "full problem sizes"
    )
    print(
        f"Executing {len(chapters)} chapter(s) at {sizes}, one fresh kernel each.",
        flush=True,
    )
    total = time.perf_counter()
    for n, qmd in enumerate(chapters, 1):
        start = time.perf_counter()
        print(f"[{n}/{len(chapters)}] {Path(qmd).name} ...", flush=True)
        try:
            path = run(qmd, progress=sys.stdout)
        except (ChapterError, FileNotFoundError) as err:
            print(err, file=sys.stderr)
            return 1
        print(
            f"[{n}/{len(chapters)}] {Path(qmd).name}: "
            f"ran in {time.perf_counter() - start:.1f} s -> "
            f"{_shown(path)}",
            flush=True,
        )
    print(
        f"All {len(chapters)} chapter(s) ran in {time.perf_counter() - total:.1f} s.",
        flush=True,
    )
    return 0


def _shown(path: Path) -> str:
    """A path relative to the project when it is inside it: what a reader types, not the
    build machine's."""
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def find(name: str) -> Path:
    """The .qmd a reader means: a path, or a name of the book's pages (``tracing``,
    ``tracing.qmd``, ``why_compile``)."""
    path = Path(name)
    if path.suffix == ".qmd" and path.exists():
        return path
    stem = path.name.removesuffix(".qmd").replace("_", "-")
    pages = {p.stem: p for p in chapter_files()}
    if stem in pages:
        return pages[stem]
    raise FileNotFoundError(f"no chapter named {name!r}.\n{_known()}")


def _known() -> str:
    """The names ``run`` takes, in the book's order."""
    return (
        "Chapters: "
        + ", ".join(p.stem for p in chapter_files())
        + (" (or a path to a .qmd file).")
    )
