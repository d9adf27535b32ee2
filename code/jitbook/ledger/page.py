"""The appendices' tables: the ledger's changes and releases, its explorer, and the
claims by chapter with each claim's evidence."""

from __future__ import annotations

import collections
import re
from pathlib import Path

from jitbook.ledger.data import ROOT, STATUSES, _order

MARKS = {"holds": "✓", "fails": "✗", "n/a": "–", "could not run": "?", None: " "}


HEADING = re.compile(r"^(#+) (.*?) \{#(sec-[\w-]+)\}", re.MULTILINE)


def sections(root: Path = ROOT) -> dict[str, dict]:
    """Every section id of the book: {sec-id: {page, chapter, section}}."""
    found = {}
    for page in [root / "index.qmd", *sorted((root / "chapters").glob("*.qmd"))]:
        text = page.read_text()
        chapter = "Preface" if page.stem == "index" else None
        for level, heading, label in HEADING.findall(text):
            if len(level) == 1:
                chapter = heading
            found[label] = {
                "page": page.stem,
                "chapter": chapter or page.stem,
                "section": heading,
            }
    return found


def releases(ledger: dict) -> list[str]:
    return sorted(ledger["releases"], key=lambda r: _order((r, None)))


def _status(claim: dict, release: str) -> str | None:
    row = claim["results"].get(release)
    return row["status"] if row else None


def history(ledger: dict, claim: dict) -> list[tuple[str, list[str]]]:
    """A claim's statuses as runs of consecutive releases: [(status, [releases])]."""
    runs: list[tuple[str, list[str]]] = []
    for release in releases(ledger):
        status = _status(claim, release) or "not run"
        if runs and runs[-1][0] == status:
            runs[-1][1].append(release)
        else:
            runs.append((status, [release]))
    return runs


def _span(rels: list[str]) -> str:
    return rels[0] if len(rels) == 1 else f"{rels[0]} to {rels[-1]}"


def changed(ledger: dict) -> list[dict]:
    """The claims whose status differs between releases, with where it changed."""
    rows = []
    for test, claim in ledger["claims"].items():
        runs = history(ledger, claim)
        if len(runs) < 2:
            continue
        words = [f"{status} on {_span(rels)}" for status, rels in runs[:-1]]
        last_status, last = runs[-1]
        words.append(f"{last_status} since {last[0]}")
        reasons = [  # the latest release where it did not hold says most
            claim["results"][rels[-1]]["reason"]
            for status, rels in runs
            if status != "holds" and claim["results"].get(rels[-1], {}).get("reason")
        ][-1:]
        rows.append(
            {
                "claim": claim["title"],
                "shown in": f"@{claim['section']}",
                "history": "; ".join(words),
                "why, where it does not hold": _code(reasons[0]) if reasons else "",
                "test": test,
                "last change": last[0],
            }
        )
    rows.sort(key=lambda row: _order((row["last change"], None)), reverse=True)
    return rows


def changes_table(ledger: dict):
    """The claims whose behaviour changed (a release where they fail) as a table, and a
    count of those that only became applicable, by the release their API appeared in."""
    from jitbook.display import Markdown, table

    hidden = ("test", "last change")
    everything = changed(ledger)
    behaved = [r for r in everything if "fails" in r["history"]]
    unrun = [r for r in everything if "could not run" in r["history"]]
    appeared = collections.Counter(
        r["last change"]
        for r in everything
        if "fails" not in r["history"] and r not in unrun
    )
    if not everything:
        return Markdown("No claim changed between the releases of the ledger.")
    rows = [
        {k: (_code(_short(v.strip("`"), 80)) if k.startswith("why") and v else v)
         for k, v in r.items() if k not in hidden}
        for r in behaved
    ]  # fmt: skip
    since = ", ".join(
        f"{n} since {release}" for release, n in sorted(appeared.items(), key=_release)
    )
    note = (
        f"\n\n{sum(appeared.values())} more claims were not applicable before their "
        f"API existed and hold since it did: {since}."
    ) + (
        f" On some releases the tests of {len(unrun)} claims could not run (their own "
        "means failed there); the Claims appendix shows where."
        if unrun
        else ""
    )
    return Markdown((table(rows).text if rows else "") + note)


def _release(item: tuple[str, int]):
    return _order((item[0], None))


def _code(text: str) -> str:
    """A reason as a code span: flags, stars and underscores stay as written."""
    return "`" + text.replace("`", "'") + "`"


def release_rows(ledger: dict) -> list[dict]:
    """Per release: versions installed, what its claims did, the time its run took."""
    rows = []
    for release in releases(ledger):
        info = ledger["releases"][release]
        v = info.get("versions", {})
        counts = {
            s: sum(_status(c, release) == s for c in ledger["claims"].values())
            for s in STATUSES
        }
        rows.append(
            {"jax": release, "jaxlib": v.get("jaxlib"), "equinox": v.get("equinox"),
             "optax": v.get("optax"), "numpy": v.get("numpy")}
            | counts
            | {"run (s)": info.get("seconds"),
               "install (s)": info.get("install seconds")}
        )  # fmt: skip
    return rows


def explorer_rows(ledger: dict) -> tuple[list[dict], list[dict]]:
    """Per release, how many claims hold, and panels: the claims that fail there (their
    reasons are in the changes table), and how many are not applicable, by section."""
    rows, panels = [], []
    claims = list(ledger["claims"].values())
    for release in releases(ledger):
        rows.append(
            {"release": release, "claims that hold": sum(
                _status(c, release) == "holds" for c in claims)}
        )  # fmt: skip
        fails = [c["title"] for c in claims if _status(c, release) == "fails"]
        absent = collections.Counter(
            c["section"] for c in claims if _status(c, release) == "n/a"
        )
        panels.append(
            {
                "fails here": "\n".join(fails) or "(none)",
                "not applicable here (claims per section)": "\n".join(
                    f"{section}: {n}" for section, n in sorted(absent.items())
                )
                or "(none)",
            }
        )
    return rows, panels


def _short(reason: str, width: int = 60) -> str:
    return reason if len(reason) <= width else reason[: width - 1] + "…"


def claim_status(ledger: dict, span: str, release: str) -> str | None:
    """A claim's status on ``release``; for a parametrised test, the worst of its
    cases (fails, could not run, n/a, holds); None when the ledger has no row."""
    rows = [row["status"] for _, row in _cases(ledger, span, release)]
    for status in ("fails", "could not run", "n/a", "holds"):
        if status in rows:
            return status
    return None


def _cases(ledger: dict, span: str, release: str) -> list[tuple[str, dict]]:
    """The ledger's rows of a claim on ``release``: (case, row), one per case of a
    parametrised test (case "" for a plain one)."""
    return [
        (name.removeprefix(span), claim["results"][release])
        for name, claim in ledger["claims"].items()
        if (name == span or name.startswith(span + "[")) and release in claim["results"]
    ]


def verdict(statuses: dict[str, str | None]) -> str:
    """A claim's record in words, counting only the releases it applies to:
    ``holds on every release it applies to (5), n/a on 6``."""
    where: dict[str | None, list[str]] = {}
    for release, status in statuses.items():
        where.setdefault(status, []).append(release)
    holds, fails = where.get("holds", []), where.get("fails", [])
    applies = len(holds) + len(fails)
    if not applies:
        words = ["no release it applies to has run it yet"]
    elif not fails:
        words = [f"holds on every release it applies to ({applies})"]
    else:
        words = [f"holds on {len(holds)} of the {applies} releases it applies to"]
    if where.get("n/a"):
        words.append(f"n/a on {len(where['n/a'])}")
    if where.get("could not run"):
        words.append(f"its test could not run on {len(where['could not run'])}")
    if where.get(None):
        words.append(f"not yet run on {len(where[None])}")
    return ", ".join(words)


def measured(ledger: dict, span: str) -> str:
    """What the claim's test measured on the book's release: the figures it recorded
    with ``measured(...)``, else the values its last assertions compared."""
    figures, checks = [], []
    for case, row in _cases(ledger, span, ledger.get("lock")):
        prefix = f"{case} " if case else ""
        for what, value in row.get("measured", []):
            shown = number(value) if isinstance(value, int | float) else value
            figures.append(f"{prefix}{what}: **{shown}**")
        checks += [prefix + _check(*a) for a in row.get("asserted", [])[-SHOWN_CHECKS:]]
    if len(checks) > MOST_CHECKS:
        checks = checks[:MOST_CHECKS] + [f"and {len(checks) - MOST_CHECKS} more cases"]
    return "; ".join(figures or checks) or "not recorded"


SHOWN_CHECKS = 1  # a test's last assertion, the one that decides, shown per case
MOST_CHECKS = 2


def _check(source: str, values: str) -> str:
    """``assert n == 1`` held as ``1 == 1``, in Markdown."""
    code = f"`{_tick(source)}`"
    return (
        f"{code} held as `{_tick(values)}`"
        if values and values != source
        else f"{code} held"
    )


def _tick(text: str, width: int = 50) -> str:
    text = text.replace("`", "'")
    return text if len(text) <= width else text[: width - 1] + "…"


def number(value: float) -> str:
    from jitbook.display import number as book_number

    return book_number(value)


def claim_rows(ledger: dict, root: Path = ROOT) -> list[dict]:
    """The Claims appendix: one entry per claim sentence, in reading order, with its
    chapter, number, tests (and their code), release-by-release status, verdict and
    what its test measured on the book's release."""
    from jitbook.ledger import spans

    names = releases(ledger)
    tests: dict[str, list] = {}
    for test in spans.claim_tests(root):
        tests.setdefault(test.span, []).append(test)
    chapters = {s: v["chapter"] for s, v in sections(root).items()}
    numbers = spans.numbers(root)
    rows = []
    for span in spans.in_book_order(root):
        statuses = {r: claim_status(ledger, span.id, r) for r in names}
        rows.append(
            {
                "number": numbers[span.id],
                "id": span.id,
                "chapter": chapters.get(span.section, span.page),
                "page": f"{span.page}.qmd" if span.page != "index" else "../index.qmd",
                "sentence": span.words,
                "tests": tests.get(span.id, []),
                "marks": [(r, MARKS[s]) for r, s in statuses.items()],
                "in ledger": any(s is not None for s in statuses.values()),
                "verdict": verdict(statuses),
                "measured": measured(ledger, span.id),
            }
        )
    return rows


def runs(marks: list[tuple[str, str]]) -> str:
    """Release-by-release marks as runs, each mark beside its releases:
    ``✗ 0.4.18 to 0.9.2 · ✓ 0.10.2 to 0.12.0.1``, each run unbroken (no-break spaces:
    a class per run would weigh the Claims page over its budget)."""
    groups: list[tuple[str, list[str]]] = []
    for release, mark in marks:
        if groups and groups[-1][0] == mark:
            groups[-1][1].append(release)
        else:
            groups.append((mark, [release]))
    return " · ".join(
        f"{mark.strip() or '·'} {_span(rels)}".replace(" ", NBSP)
        for mark, rels in groups
    )


NBSP = "\u00a0"


def _evidence(row: dict, root: Path) -> str:
    """One claim's evidence as Markdown: the target of its mark in the pages."""
    from jitbook.site.claim_tests import page_of

    code = ", ".join(
        f"[{'its test' if i == 0 else 'and another'}]({page_of(t)})"
        for i, t in enumerate(row["tests"])
    )
    marks = runs(row["marks"]) if row["in ledger"] else "not yet in the ledger"
    return (
        f"::: {{#ev-{row['id']} .claim-evidence}}\n"
        f"[claim {row['number']}]{{.claim-number}} {row['sentence']} "
        f"[↩{NBSP}back]({row['page']}#{row['id']})\n\n"
        f"Measured: {row['measured']}. Releases: {marks}; {row['verdict']}. "
        f'[Code: {code}.]{{.content-visible when-format="html"}}\n'  # pages of the site
        ":::\n"
    )


def claim_evidence(ledger: dict, root: Path = ROOT):
    """The Claims appendix's body: each chapter's claims folded under its name and count
    (a claim's mark opens the fold it lands in; the PDF prints every fold open)."""
    import itertools

    from jitbook.display import Markdown

    parts = []
    for chapter, rows in itertools.groupby(
        claim_rows(ledger, root), lambda r: r["chapter"]
    ):
        rows = list(rows)
        parts.append(
            f"::: {{.fold}}\n### {chapter} · {len(rows)} claim{'s' * (len(rows) != 1)}"
            " {.unnumbered .unlisted}\n"
        )
        parts += [_evidence(row, root) for row in rows]
        parts.append(":::\n")
    return Markdown("\n".join(parts))
