"""``python -m jitbook.bench pln``: every PLN level, and the peers, raced in rounds.

Every flag is checked before any work starts (argparse names the flag); progress (what
runs, how long it took) goes to stderr, the tables to stdout.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from time import perf_counter

from jitbook.display import table
from jitbook.heartbeat import Heartbeat

PEERS_HELP = (
    "also race PyTorch eager, torch.compile (the fast level's and the tutorial's "
    "algorithms) and pyPLNmodels' fit, in this interpreter (optional: pip install -e "
    ".[peers]); both sides get the same cores and threads (--cores), each is raced "
    "against itself as a control, and no verdict is printed when the load reached the "
    "cores or a control failed"
)


def _whole(least: int, what: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < least:
            raise argparse.ArgumentTypeError(
                f"must be a whole number >= {least} ({what}), got {text!r}"
            )
        return value

    return parse


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be seconds >= 0, got {text!r}")
    return value


def _choices(known: dict, what: str) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        names = [name for name in text.split(",") if name]
        unknown = [name for name in names if name not in known]
        if unknown:
            raise argparse.ArgumentTypeError(
                f"{', '.join(map(repr, unknown))} cannot be {what}; choose from "
                f"{', '.join(known)} (comma-separated)"
            )
        return names

    return parse


def _python(text: str) -> str:
    if not os.path.isfile(text) or not os.access(text, os.X_OK):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an executable file; give the path of a Python that has "
            "torch and pyPLNmodels, e.g. a venv's bin/python"
        )
    return text


def _say(start: float) -> Callable[[str], None]:
    def say(text: str) -> None:
        print(
            f"    {text} ({perf_counter() - start:.0f} s so far)",
            file=sys.stderr,
            flush=True,
        )

    return say


def _step(what: str, run: Callable, every: float = 30.0):
    """Run one step, saying on stderr what it is, that it is still running at least
    every `every` seconds, and how long it took."""
    print(f"... {what}", file=sys.stderr, flush=True)
    start = perf_counter()

    def say(_: float) -> None:
        print(
            f"    {what}: still running, {perf_counter() - start:.0f} s",
            file=sys.stderr,
            flush=True,
        )

    with Heartbeat(every, say):
        out = run()
    print(
        f"... {what}: done in {perf_counter() - start:.1f} s",
        file=sys.stderr,
        flush=True,
    )
    return out


def add_parser(sub) -> None:
    """The ``pln`` subcommand's flags, each checked by its own type."""
    from jitbook.chapters.pln.levels import LEVELS
    from jitbook.chapters.pln.profile import PROGRAMS

    pln = sub.add_parser(
        "pln",
        help="the PLN worked example: every level, compile and run time",
        description=__doc__.splitlines()[0] + " " + _how_long(),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add = pln.add_argument
    add(
        "--n-repeat",
        type=_whole(1, "times the oaks rows are repeated"),
        default=100,
        help="rows of the oaks data repeated (100: the tutorial's size)",
    )
    add(
        "--iters",
        type=_whole(1, "iterations per fit"),
        default=200,
        help="iterations per fit",
    )
    add(
        "--rounds",
        "--repeats",
        type=_whole(1, "interleaved rounds"),
        default=5,
        help="interleaved rounds at least (5 or more for a verdict)",
    )
    add(
        "--min-time",
        type=_seconds,
        default=0.0,
        help="seconds of timed fits to reach, in more rounds if needed",
    )
    add(
        "--eager-iters",
        type=_whole(1, "iterations of the eager level"),
        default=3,
        help="iterations actually run by the eager level",
    )
    add(
        "--levels",
        type=_choices(LEVELS, "raced"),
        default=",".join(LEVELS),
        help="comma-separated subset of levels",
    )
    add(
        "--newton-iters",
        type=_whole(0, "iterations of the Newton fit; 0 skips it"),
        default=argparse.SUPPRESS,
        help="iterations of the Newton fit, 0 to skip (default: 5 x --iters)",
    )
    add(
        "--profile-levels",
        type=_choices(PROGRAMS, "profiled"),
        default="scan,fast",
        help="one-program levels to profile per XLA operation (empty: none)",
    )
    add("--peers", action="store_true", help=PEERS_HELP)
    add(
        "--peers-python",
        type=_python,
        default=None,
        help="race the peers in this interpreter (a Python with torch, pyPLNmodels)",
    )
    add(
        "--cores",
        type=_whole(1, "cores both sides are pinned to"),
        default=len(os.sched_getaffinity(0)),
        help="with the peers: pin JAX and PyTorch to the same first N cores this "
        "process may use, N threads in each side's intra-op pool",
    )
    add(
        "--one-off",
        type=_whole(0, "rounds of the one-off race; 0 skips it"),
        default=0,
        metavar="ROUNDS",
        help="with the peers: race the Newton fit against pyPLNmodels' fit as a user "
        "runs each once, in ROUNDS interleaved rounds of fresh processes (imports and "
        "compiles included), each side also against itself; 0 skips it",
    )
    add(
        "--record",
        nargs="?",
        const="",
        default=None,
        metavar="NAME",
        help="write the run to data/peers/NAME.json (default NAME: the date); needs "
        "the peers, and refuses a run not fit to compare",
    )
    add(
        "--force-record",
        action="store_true",
        help="with --record: write a run not fit to compare all the same, marked unfit "
        "(a page reading it draws no verdict)",
    )
    pln.set_defaults(run=run)


def _how_long() -> str:
    """How long a run took here: the recorded one, measured, not guessed."""
    from jitbook.chapters.pln.levels import LEVELS
    from jitbook.chapters.pln.peers import latest

    rec = latest()
    if rec is None:
        return ""
    busy = (
        max(rec["load average at start"][0], rec["load average at end"][0])
        > rec["cpu"]["cores"]
    )
    return (
        f"The recorded run `{rec['command']}` took {rec['wall s'] / 60:.0f} min on a "
        f"{'busy ' * busy}{rec['cpu']['cores']}-core machine ({rec['date'][:10]}). The "
        "default "
        f"run is larger ({len(LEVELS)} levels, the tutorial's 11,600 rows, 200 "
        "iterations, the Newton fit to 1,000, two profiles, no peers): expect it to "
        "take longer; --iters 20 --levels scan,fast --newton-iters 0 --profile-levels "
        "'' is a short first look."
    )


def _start_peer(args, data, cores):
    """The peers' interpreter, started (pinned to `cores`, its pools sized to them) and
    asked to set up before any JAX work, so a missing torch is said at once. None: no
    peers."""
    from jitbook.chapters.pln import peers

    if args.peers_python is None and not args.peers:
        return None
    if args.peers_python is None:
        missing = peers.peers_missing()
        if missing:
            print(
                f"--peers: {missing}\nThe JAX levels follow, without the peers.\n",
                flush=True,
            )
            return None
    python = args.peers_python or sys.executable
    try:
        return _step(
            f"peers: starting {python}",
            lambda: peers.Peer(python, data, args.iters, cores=cores),
        )
    except RuntimeError as err:
        raise SystemExit(f"--peers-python {python}: {err}") from None


# The variants that race against themselves: one JAX level, one peer.
CONTROLS = ("fast", "torch.compile")


def run(args: argparse.Namespace) -> None:
    """The whole benchmark: levels (and peers) raced, donation, threads, profiles,
    Newton against pyPLNmodels; with the peers, the conditions and controls decide
    whether a verdict is printed and `--record` writes."""
    racing_peers = args.peers or args.peers_python
    if args.record is not None and not racing_peers:
        raise SystemExit(
            "--record writes the peers' run: add --peers-python PATH (or --peers)"
        )
    if args.force_record and args.record is None:
        raise SystemExit("--force-record forces --record: add --record NAME")
    args.newton_iters = getattr(args, "newton_iters", 5 * args.iters)
    if args.one_off and not (racing_peers and args.newton_iters):
        raise SystemExit(
            "--one-off races the Newton fit against pyPLNmodels': add --peers-python "
            "PATH, and --newton-iters above 0"
        )
    from jitbook.bench import conditions
    from jitbook.chapters.pln import load_oaks, peers

    start, say = perf_counter(), _say(perf_counter())
    jax_side = None
    if racing_peers:  # pinned before JAX starts its backend, which sizes XLA's pool
        try:
            cores = conditions.budget(args.cores)
        except ValueError as err:
            raise SystemExit(str(err)) from None
        jax_side = conditions.pin_jax(cores) | {"OpenBLAS threads inside a fit": 1}
    raw = load_oaks(args.n_repeat)
    peer = _start_peer(args, raw, jax_side and jax_side["cores"])
    record = peers.start_record(sys.argv[1:] if args.argv is None else args.argv)
    with conditions.LoadWatch() as load:
        try:
            out = _levels(args, raw, peer, say)
            if args.newton_iters:
                out |= _newton(args, raw, peer, say)
            if peer is not None:
                out["cross-check"] = _cross_check(peer, out, say)
        finally:
            if peer is not None:
                peer.close()
    record |= out | {"load average at end": load.after, "wall s": 0.0}
    if peer is not None:
        record["conditions"] = {
            "load": load.record(),
            "JAX": jax_side | conditions.xla_threads(),  # the pools as they ran
            "peer": {
                k: peer.info[k]
                for k in ("cores", "env", "torch threads", "torch interop threads")
            },
        }
    reasons = _verdicts(record, peer is not None)
    _extras(args, raw, say)
    record["wall s"] = round(perf_counter() - start, 1)
    if args.record is not None and peer is not None:
        if reasons and not args.force_record:
            raise SystemExit(
                "\nNot recorded: the race was not fit to compare (see why above). "
                "Run it on a quiet machine, or add --force-record to keep it marked "
                "unfit."
            )
        path = peers.write_record(record, args.record, forced=args.force_record)
        print(f"\nRecorded in {path}" + (" (marked unfit)" * bool(reasons)))


def _verdicts(record: dict, against_peers: bool) -> list[str]:
    """Print the conditions, the controls and the verdicts, or no verdict and why;
    the reasons (empty: fit to compare)."""
    from jitbook.bench import conditions
    from jitbook.chapters.pln import peers

    reasons = conditions.unfit_reasons(record) if against_peers else []
    if against_peers:
        load = record["conditions"]["load"]
        print(
            f"\nConditions: {record['cpu']['cores']} cores; 1-minute load average "
            f"{load['before'][0]:g} before, {load['highest 1-minute']:g} at most "
            f"({load['readings']} readings), {load['after'][0]:g} after\n"
        )
        print(table(conditions.conditions_rows(record)))
        print("\nControls: each raced against itself, in the same rounds\n")
        print(table(_control_rows(record)))
        print("\nEach PyTorch fit alone, timed by its own library's tool\n")
        print(table(_cross_rows(record)))
    if reasons:
        print(
            "\nNo verdict: this race cannot tell, because " + "; ".join(reasons) + "."
        )
        return reasons
    raced = peers.recorded_race(record)
    pairing = {(a, b): p for a, b, p in peers.PAIRS}
    print()
    for (a, b), v in peers.verdicts(raced).items():
        print(f"{a} was {v} {b} (warm; {pairing[a, b]}).")
    newton = peers.newton_verdict(record) if "newton" in record else None
    if newton is not None:
        print(f"Newton to that loss was {newton} pyPLNmodels' fit (warm).")
    once = peers.one_off_verdict(record)
    if once is not None:
        print(
            f"One-off, Newton to that loss was {once} pyPLNmodels' fit (each run once "
            "in a fresh process, imports and compiles included)."
        )
    return reasons


def _control_rows(record: dict) -> list[dict]:
    from jitbook.bench.conditions import CONTROL
    from jitbook.timing import verdict_from_rounds

    race = record["race"]
    return [
        {
            "control": f"{name.removesuffix(CONTROL)} against itself",
            "verdict": str(
                verdict_from_rounds(race[name.removesuffix(CONTROL)], race[name])
            ),
            "should be": "about the same here as",
        }
        for name in race
        if name.endswith(CONTROL)
    ]


def _cross_rows(record: dict) -> list[dict]:
    return [
        {
            "peer": name,
            "ms / iter in the race (median)": round(c["race median s / iter"] * 1e3, 3),
            "ms / iter alone, torch.utils.benchmark.Timer (median)": round(
                c["timer median s / iter"] * 1e3, 3
            ),
        }
        for name, c in record.get("cross-check", {}).items()
    ]


def _cross_check(peer, out: dict, say) -> dict:
    """Each peer variant timed alone by PyTorch's own tool, with the race's threads,
    beside its median in the race."""
    from jitbook.timing import Race

    raced, checked = Race(out["race"], out["per"]), {}
    for name in peer.variants:
        alone = _step(
            f"{name} alone, torch.utils.benchmark.Timer",
            lambda name=name: peer.timer(name),
        )
        checked[name] = {
            "race median s / iter": raced.median(name),
            "timer median s / iter": alone["median s"] / out["per"],
            "timer measurements": alone["measurements"],
        }
    return checked


def _levels(args, raw, peer, say) -> dict:
    from jitbook.chapters.pln import device_data, peers
    from jitbook.chapters.pln.bench import SAME_LOOP, benchmark_levels

    data = device_data(raw)
    n, p = data.Y.shape
    print(
        f"PLN levels, {n:,} x {p}, {args.iters} iterations per fit, ms per iteration: "
        f"minimum, median and maximum over interleaved rounds (at least {args.rounds}, "
        "OpenBLAS limited inside every fit, as pln.fit does)\n"
    )
    where = "" if peer is None else f" and {', '.join(peer.variants)} in {peer.python}"
    rows, raced = _step(
        f"levels {', '.join(args.levels)}{where}",
        lambda: benchmark_levels(
            data,
            args.iters,
            args.levels,
            args.rounds,
            args.eager_iters,
            args.min_time,
            peer,
            say,
            controls=CONTROLS if peer is not None else (),
        ),
    )
    caption = None if peer is None else peers.caption(peer.info, peer.python)
    print(table(rows, caption))
    same = [lv for lv in SAME_LOOP if lv in raced.names]
    if len(same) > 1:
        print(
            f"\n{', '.join(same)}: one compiled loop written differently; "
            + (
                "they agree here."
                if raced.agree(same)
                else "they disagree: the machine was noisy."
            )
        )
    return {
        "n": n,
        "p": p,
        "rows": rows,
        "race": raced.times,
        "per": raced.per,
        "peer": None if peer is None else peer.info,
    }


def _newton(args, raw, peer, say) -> dict:
    from jitbook.chapters.pln import device_data
    from jitbook.chapters.pln.bench import newton_time_to_target
    from jitbook.chapters.pln.converge import (
        PYPLN_REFERENCE_NEG_ELBO,
        PYPLN_REFERENCE_REPEAT,
    )
    from jitbook.chapters.pln.peers import pypln_loss

    data, pypln = device_data(raw), None
    if peer is not None:
        pypln = _step("pyPLNmodels' own fit (its target)", peer.pypln)
        target = pypln_loss(pypln, raw)
        source = f"pyPLNmodels {pypln['version']}'s loss, measured now"
    else:
        target = PYPLN_REFERENCE_NEG_ELBO * args.n_repeat / PYPLN_REFERENCE_REPEAT
        source = (
            f"the pyPLNmodels reference loss (measured at repeat "
            f"{PYPLN_REFERENCE_REPEAT}, scaled)"
        )
    row, raced = _step(
        f"Newton fit, {args.newton_iters} iterations, then raced to the target",
        lambda: newton_time_to_target(
            data,
            target,
            args.newton_iters,
            args.rounds,
            None if peer is None else peer.pypln_race,
            say,
        ),
    )
    print(f"\nNewton fit, time to {source}: {target:,.0f}\n")
    print(table([row]))
    out = {"newton": row, "newton race": raced.times, "target": target}
    if pypln is not None:
        out["pypln"] = {
            k: pypln[k] for k in ("seconds", "iterations", "elbo", "version")
        }
        out |= _one_off(args, raw, peer, row, say)
    return out


def _one_off(args, raw, peer, row: dict, say) -> dict:
    """The one-off race, when asked for and Newton reached pyPLNmodels' loss: what a
    user who runs each fit once waits for, imports and compiles included."""
    from jitbook.chapters.pln.bench import one_off_race

    stop = row["iterations to target"]
    if not args.one_off or not stop:
        why = (
            "--one-off ROUNDS races each side cold, in fresh processes"
            if not args.one_off
            else "the Newton fit did not reach pyPLNmodels' loss in "
            f"{row['iterations']} iterations (raise --newton-iters)"
        )
        print(f"One-off, compiles included: not raced ({why}).")
        return {}
    raced = _step(
        f"one-off race, {args.one_off} rounds of fresh processes",
        lambda: one_off_race(raw, stop, peer.pypln_cold, args.one_off, say),
    )
    print(
        f"\nOne-off: Newton ({stop} iterations) and pyPLNmodels' fit, each in a fresh "
        "process per round, imports and compiles included\n"
    )
    print(raced.table)
    return {"one-off race": {"times": raced.times, "Newton iterations": stop}}


def _extras(args, raw, say) -> None:
    """Donation, the two thread pools and the profiles: JAX only."""
    from jitbook.chapters.pln import device_data
    from jitbook.chapters.pln.bench import donation_race, thread_contention
    from jitbook.chapters.pln.profile import PROGRAMS, op_profile
    from jitbook.chapters.pln.threads import blas_limited

    data, iters = device_data(raw), min(args.iters, 50)
    if "jit_iteration" in args.levels:
        print(f"\nDonating the state of jit_iteration, {iters} iterations\n")
        donated = _step("donation", lambda: donation_race(data, iters, args.rounds))
        print(donated.table)
        v = donated.verdict("jit_iteration, state donated", "jit_iteration")
        print(f"donated was {v} not donated.")
    print(f"\nTwo thread pools: the scan level's loop, {iters} iterations\n")
    rows, pools = _step(
        "thread contention", lambda: thread_contention(data, iters, "scan", args.rounds)
    )
    print(table(rows))
    print(
        f"Limited, the loop was {pools.verdict(*reversed(pools.names))} with the "
        "pool as the process has it."
    )
    for level in args.profile_levels:

        def profile(level=level):
            with blas_limited():
                PROGRAMS[level](data, 20, 1.0)[0].block_until_ready()
                return op_profile(lambda: PROGRAMS[level](data, 20, 1.0)[0], 20)

        rows = _step(f"profile of {level}", profile)
        print(
            f"\nProfile of the {level} level: most expensive XLA operations, ms per "
            "iteration\n"
        )
        print(table(rows))
