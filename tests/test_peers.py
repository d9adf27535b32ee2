"""The peers: PyTorch runs the fast level's and the tutorial's algorithms (same ELBO, same iterates), the
bench races them in the levels' rounds through a peer process, and the PLN page reads the recorded runs.

Torch is an optional extra. The tests that need it run in this interpreter if it has torch, or in the one
named by JITBOOK_PEERS_PYTHON (e.g. a Python 3.11 venv with a CPU build of torch); otherwise they skip. A fake
peer interpreter (a script speaking the same protocol) tests the bench without torch.
"""

import importlib.util
import json
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import jitbook
from jitbook import bench, display
from jitbook.bench import conditions
from jitbook.chapters.pln import (
    closed_form_sigma,
    fit,
    init_params,
    load_oaks,
    neg_elbo,
    neg_elbo_numpy,
    peers,
)

PEERS_PYTHON = os.environ.get("JITBOOK_PEERS_PYTHON")
HAS_TORCH = importlib.util.find_spec("torch") is not None


def torch_task(task: str, arrays: dict, **options) -> dict:
    """Run a peers task here if torch imports, else in JITBOOK_PEERS_PYTHON."""
    if HAS_TORCH:
        data = (arrays["Y"], arrays["O"], arrays["X"])
        if task == "elbo":
            params = (arrays["B"], arrays["M"], arrays["S"])
            return {"loss": peers.torch_neg_elbo(params, data, arrays["Omega"]).numpy()}
        losses, _ = peers.run_torch(data, **options)
        return {"losses": losses}
    return peers.run_in(PEERS_PYTHON, task, arrays, **options)


needs_torch = pytest.mark.skipif(
    not HAS_TORCH and not PEERS_PYTHON,
    reason="torch is not installed here (pip install -e .[peers], or set JITBOOK_PEERS_PYTHON to a Python that has it)",
)


def data_arrays(repeat: int = 1) -> dict:
    return dict(zip("YOX", load_oaks(repeat), strict=True))


@needs_torch
def test_torch_elbo_agrees_with_neg_elbo():
    data = load_oaks(1)
    rng = np.random.default_rng(0)
    B, M, S = (np.asarray(x) for x in init_params(data))
    params = (
        B + 0.1,
        M + 0.3 * rng.standard_normal(M.shape, dtype=np.float32),
        S * 0.7,
    )
    Omega = np.linalg.inv(np.asarray(closed_form_sigma(params[1], params[2])))
    out = torch_task(
        "elbo", data_arrays() | dict(zip("BMS", params, strict=True)) | {"Omega": Omega}
    )
    assert float(out["loss"]) == pytest.approx(
        float(neg_elbo(params, data, Omega)), rel=1e-5
    )
    assert float(out["loss"]) == pytest.approx(
        neg_elbo_numpy(params, data, Omega), rel=1e-5
    )


@needs_torch
def test_torch_fit_follows_the_fast_level():
    data, n_iter = load_oaks(1), 40
    jax_losses = fit(data, n_iter, "fast").losses
    torch_losses = torch_task("fit", data_arrays(), n_iter=n_iter)["losses"]
    assert torch_losses.shape == (n_iter,)
    assert torch_losses[-1] < torch_losses[0] / 2  # it descends, as the fast level does
    np.testing.assert_allclose(torch_losses, jax_losses, rtol=1e-4)


def test_bench_without_peers_says_how_and_prints_the_jax_table(capsys, monkeypatch):
    monkeypatch.setattr(
        peers, "peers_missing", lambda: "torch is not installed: " + peers.INSTALL_HINT
    )
    bench.main(
        [
            "pln",
            "--n-repeat",
            "1",
            "--iters",
            "3",
            "--repeats",
            "1",
            "--levels",
            "fast",
            "--newton-iters",
            "0",
            "--profile-levels",
            "",
            "--peers",
        ]
    )
    out = capsys.readouterr().out
    assert out.startswith(
        "--peers: torch is not installed"
    )  # said before the JAX levels run
    assert "| fast |" in out and "pip install -e .[peers]" in out
    assert "PyTorch eager" not in out


def test_run_in_an_interpreter_without_torch_says_so():
    if peers.peers_missing() is None:
        pytest.skip("this interpreter has the peers, so it cannot show their absence")
    with pytest.raises(RuntimeError, match="(?s)could not run the peers.*torch"):
        peers.run_in(
            sys.executable, "elbo", data_arrays() | {"B": 0, "M": 0, "S": 1, "Omega": 1}
        )


def test_pypln_loss_scores_its_parameters_with_the_book_elbo():
    data = load_oaks(1)
    B, M, S = (np.asarray(x, np.float64) for x in init_params(data))
    result = {"B": B, "M": M + 0.1, "S": S}
    Omega = np.linalg.inv(np.asarray(closed_form_sigma(M + 0.1, S), np.float64))
    loss = peers.pypln_loss(result, data)
    assert loss == pytest.approx(neg_elbo_numpy((B, M + 0.1, S), data, Omega), rel=1e-6)


# A fake peer interpreter: it ignores its arguments and answers the peers' protocol with
# short sleeps and a fake pyPLNmodels fit (the parameters it starts from).
FAKE_PEER = """#!{python}
import json, os, sys, time
import numpy as np

if "first-fit" in sys.argv:  # pyPLNmodels' first fit, in a fresh process
    time.sleep(0.05)
    print(json.dumps({{"fit s": 0.05, "pid": os.getpid()}}))
    sys.exit()
state = {{}}
for line in sys.stdin:
    msg = json.loads(line)
    if msg["op"] == "setup":
        with np.load(msg["data"]) as a:
            state["shape"], state["d"] = a["Y"].shape, a["X"].shape[1]
        cores = msg.get("cores") or [0]
        answer = {{"python": "3.11.0", "torch": "fake", "pyPLNmodels": "fake", "torch threads": len(cores),
                  "torch interop threads": 1, "cores": cores, "variants": {variants},
                  "env": {{"OMP_WAIT_POLICY": "PASSIVE"}}}}
    elif msg["op"] == "call":
        start, first = time.perf_counter(), msg["name"] not in state
        state[msg["name"]] = True
        time.sleep(0.3 if first and msg["name"].startswith("torch.compile") else 0.01)
        answer = {{"seconds": time.perf_counter() - start}}
    elif msg["op"] == "timer":
        time.sleep(0.01)
        answer = {{"median s": 0.01, "measurements": 1}}
    elif msg["op"] == "pypln race":
        time.sleep(0.01)
        answer = {{"seconds": 0.01}}
    elif msg["op"] == "pypln":
        n, p = state["shape"]
        np.savez(msg["out"], B=np.zeros((state["d"], p)), M=np.zeros((n, p)) + 0.5, S=np.ones((n, p)))
        answer = {{"seconds": 0.01, "iterations": 3, "elbo": -1.0, "version": "fake"}}
    else:
        answer = {{}}
    print(json.dumps(answer), flush=True)
"""


@pytest.fixture
def fake_peer(tmp_path):
    path = tmp_path / "python"
    path.write_text(
        FAKE_PEER.format(python=sys.executable, variants=list(peers.VARIANTS))
    )
    path.chmod(0o755)
    return str(path)


def run_with_fake_peer(fake_peer, *flags) -> None:
    """The bench with the fake peer; the cores it pins this process to are given back
    after it."""
    allowed = os.sched_getaffinity(0)
    try:
        bench.main(
            [
                "pln",
                "--n-repeat",
                "1",
                "--iters",
                "3",
                "--rounds",
                "5",
                "--levels",
                "scan,fast",
                "--profile-levels",
                "",
                "--newton-iters",
                "5",
                "--peers-python",
                fake_peer,
                *flags,
            ]
        )
    finally:
        os.sched_setaffinity(0, allowed)


def table_rows(out: str) -> dict:
    """The levels table (the first one printed): its rows by their first cell."""
    lines = out[out.index("| level |") :].split("\n\n")[0].splitlines()
    rows = {
        line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
        for line in lines
    }
    return {
        name: dict(zip(rows["level"], cells, strict=True))
        for name, cells in rows.items()
    }


def test_bench_with_a_peer_fills_every_timing_cell_and_prints_conditions_controls_and_cross_checks(
    fake_peer, tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(peers, "RECORDINGS", tmp_path / "recorded")
    run_with_fake_peer(fake_peer, "--cores", "1", "--record", "fake", "--force-record")
    out, err = capsys.readouterr()
    rows = table_rows(out)
    for name in ("scan", "fast", *peers.VARIANTS):
        for column in (
            "first call s",
            "ms / iter (min)",
            "ms / iter (median)",
            "ms / iter (max)",
        ):
            assert float(rows[name][column]) > 0, (name, column)
        assert rows[name]["rounds"] == "5"
    assert float(rows["torch.compile"]["compile s"]) > 0.2  # first call minus median
    assert "in the same interleaved rounds" in out and "Conditions: " in out
    assert (
        "| fast against itself |" in out and "| torch.compile against itself |" in out
    )
    assert "torch.utils.benchmark.Timer" in out
    assert "One-off, compiles included: not raced (--one-off ROUNDS races" in out
    assert (
        "first call of torch.compile: " in err
        and "pyPLNmodels' own fit (its target): done in" in err
    )
    recorded = json.loads((tmp_path / "recorded" / "fake.json").read_text())
    for key in (
        "date",
        "book commit",
        "machine",
        "cpu",
        "load average at start",
        "conditions",
        "load average at end",
        "peer",
        "race",
        "rows",
        "newton",
        "pypln",
        "wall s",
        "cross-check",
    ):
        assert key in recorded, key
    cond = recorded["conditions"]
    assert (
        cond["JAX"]["cores"] == cond["peer"]["cores"]
        and len(cond["peer"]["cores"]) == 1
    )
    assert (
        recorded["race"]["fast (control)"]
        and recorded["race"]["torch.compile (control)"]
    )
    reasons = conditions.unfit_reasons(recorded)
    assert (
        recorded["fit to compare"] is (not reasons)
        and recorded["unfit because"] == reasons
    )
    said_verdicts = (
        " than torch.compile (warm; whole loop" in out
        or "about the same here as torch.compile" in out
    )
    assert said_verdicts is (not reasons)
    assert ("No verdict: this race cannot tell, because " in out) is bool(reasons)
    assert recorded["command"].endswith("--record fake --force-record")


def test_a_race_on_a_busy_machine_prints_no_verdict_and_is_not_recorded(
    fake_peer, tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(peers, "RECORDINGS", tmp_path / "recorded")
    monkeypatch.setattr(
        os, "getloadavg", lambda: (7.5, 6.0, 5.0)
    )  # the machine's reading, faked
    with pytest.raises(
        SystemExit, match="Not recorded: the race was not fit to compare"
    ):
        run_with_fake_peer(fake_peer, "--record", "busy")
    out = capsys.readouterr().out
    assert (
        "No verdict: this race cannot tell, because the load average reached 7.5 on "
        in out
    )
    shown = out.split("Conditions: ")[1].split("Two thread pools")[0]
    verdicts = [  # a control's own outcome may read "faster": that is why the race is unfit
        line
        for line in shown.splitlines()
        if " times faster than " in line
        and "itself" not in line
        and "control" not in line
    ]
    assert verdicts == []
    assert not (tmp_path / "recorded").exists()


def test_a_one_off_race_runs_each_side_in_a_fresh_process_every_round_and_gives_no_verdict_under_load(
    fake_peer, tmp_path, capsys, monkeypatch
):
    from jitbook.chapters.pln import bench as pln_bench

    monkeypatch.setattr(peers, "RECORDINGS", tmp_path / "recorded")
    monkeypatch.setattr(os, "getloadavg", lambda: (7.5, 6.0, 5.0))  # faked: busy
    newton, pypln = [], []
    run_cold, pypln_cold = pln_bench.run_cold, peers.Peer.pypln_cold

    def newton_spy(fn, *args):
        out = run_cold(fn, *args)
        if fn is pln_bench.newton_cold:  # not the levels' first fits
            newton.append(out)
        return out

    def pypln_spy(peer):
        pypln.append((pypln_cold(peer), peer._proc.pid))
        return pypln[-1][0]

    monkeypatch.setattr(pln_bench, "run_cold", newton_spy)
    monkeypatch.setattr(peers.Peer, "pypln_cold", pypln_spy)
    run_with_fake_peer(
        fake_peer,
        "--newton-iters",
        "30",
        "--one-off",
        "2",
        "--record",
        "f",
        "--force-record",
    )
    out = capsys.readouterr().out
    recorded = json.loads((tmp_path / "recorded" / "f.json").read_text())
    times = recorded["one-off race"]["times"]
    assert {name: len(t) for name, t in times.items()} == {
        "Newton, cold": 2,
        "pyPLNmodels fit(), cold": 2,
        "Newton, cold (control)": 2,
        "pyPLNmodels fit(), cold (control)": 2,
    }
    # each round, each side and its control: a process of its own, apart from the peer's
    assert len(newton) == 4 and len(pypln) == 4
    assert len({pid for answer, _ in pypln for pid in [answer["pid"]]}) == 4
    assert all(answer["pid"] != serving for answer, serving in pypln)
    stop = recorded["one-off race"]["Newton iterations"]
    assert stop == recorded["newton"]["iterations to target"]
    assert all(n["final loss"] <= recorded["target"] * (1 + 1e-6) for n in newton)
    assert min(times["Newton, cold"]) > recorded["newton"]["seconds to target"]
    assert "One-off: Newton (" in out and "| Newton, cold |" in out
    assert "One-off, Newton to that loss was" not in out  # unfit: no verdict
    assert peers.one_off_verdict(recorded) is None and not recorded["fit to compare"]


def test_a_peer_without_torch_is_said_before_any_jax_work(capsys):
    if peers.peers_missing() is None:
        pytest.skip("this interpreter has the peers, so it cannot show their absence")
    with pytest.raises(
        SystemExit, match=f"--peers-python {sys.executable}: .*torch is not installed"
    ):
        bench.main(
            ["pln", "--n-repeat", "1", "--iters", "3", "--peers-python", sys.executable]
        )
    assert "... levels" not in capsys.readouterr().err


def test_the_peer_process_is_reaped_when_closed(fake_peer):
    peer = peers.Peer(fake_peer, load_oaks(1), 3)
    assert peer.call("PyTorch eager") > 0
    proc = peer._proc
    peer.close()
    assert proc.poll() is not None


@needs_torch
def test_torch_tutorial_algorithm_follows_the_scan_level():
    data, n_iter = load_oaks(1), 30
    jax_losses = fit(data, n_iter, "scan").losses
    torch_losses = torch_task(
        "fit", data_arrays(), n_iter=n_iter, algorithm="tutorial"
    )["losses"]
    np.testing.assert_allclose(torch_losses, jax_losses, rtol=1e-4)


def page_section() -> str:
    text = (Path(__file__).parents[1] / "chapters" / "pln-fast.qmd").read_text()
    start = text.index("## PyTorch on a CPU, answered {#sec-pln-peers}")
    return text[start : text.index("\n## ", start + 1)]


VERDICT_WORDS = re.compile(
    r"times faster than|times slower than|about the same here as"
)


def run_page_section() -> tuple[dict, list[str]]:
    """The section's cells and inline values, run as the page runs them."""
    namespace = {"jitbook": jitbook, "display": display}
    for cell in re.findall(r"```\{python\}\n(.*?)```", page_section(), re.S):
        exec(cell, namespace)
    inline = [
        str(eval(expr, namespace))
        for expr in re.findall(r"`\{python\} (.+?)`", page_section())
    ]
    return namespace, inline


RECORDINGS = ("full", "tenth", "newton-tenth")


def test_the_pln_page_reads_the_quiet_recordings_and_names_each_verdicts_pairing():
    """The section's cells and inline values run on the recordings alone (no torch here):
    full.json at the tutorial's size, tenth.json, newton-tenth.json; fit to compare, each
    gives its warm verdicts, named by pairing, ties included."""
    full, tenth = peers.recording("full"), peers.recording("tenth")
    assert full is not None and tenth is not None, "data/peers/full.json or tenth.json"
    assert (full["n"], tenth["n"]) == (11_600, 1_160)
    namespace, inline = run_page_section()
    assert namespace["recorded"] == full and namespace["peer_runs"]["tenth"] == tenth
    said = " ".join(inline)
    assert full["date"][:10] in said and full["book commit"] in inline
    rows = {
        name: peers.verdict_rows(peers.recording(name)) for name in ("full", "tenth")
    }
    for name, run in namespace["peer_runs"].items():
        assert not conditions.unfit_reasons(run)
        size = f"{run['n']:,} x {run['p']}"
        for row, shown in zip(rows[name], namespace["peer_rows"], strict=True):
            assert shown[size] == row["warm verdict"] and VERDICT_WORDS.search(
                row["warm verdict"]
            )
    for row in rows["full"]:  # the headline: every verdict, with its pairing named
        pairing = row["pairing"].split(":")[0]
        assert f"{row['warm verdict']} ({pairing})" in namespace["headline"]
    ties = sum("about the same" in r["warm verdict"] for r in rows["full"])
    assert f"about the same in {ties} " in namespace["claim_answer"]
    assert "Warm, the Newton fit was " in namespace["newton_words"]
    assert "did not reach pyPLNmodels' loss" in namespace["full_newton_words"]
    remade = peers.remake(full, "peers-venv/bin/python")
    assert all(len(line) <= 88 for line in remade.splitlines()), "the page's column"
    assert "--peers-python peers-venv/bin/python" in remade.replace(" \\\n    ", " ")


def made_busy(record: dict) -> dict:
    """`record` as if its load had reached 7.5 on its cores."""
    load = record["conditions"]["load"] | {"highest 1-minute": 7.5}
    return record | {"conditions": record["conditions"] | {"load": load}}


def test_the_pln_page_draws_no_verdict_from_recordings_unfit_to_compare(monkeypatch):
    busy = {name: made_busy(peers.recording(name)) for name in RECORDINGS}
    monkeypatch.setattr(peers, "recording", busy.get)
    namespace, inline = run_page_section()
    said = " ".join(inline) + " ".join(
        r["warm verdict"] for r in peers.verdict_rows(busy["full"])
    )
    assert not VERDICT_WORDS.search(said), "a verdict drawn from an unfit recording"
    assert "no verdict (not fit to compare)" in namespace["claim_answer"]
    assert "the load average reached 7.5 on 2 cores" in said
    assert "No verdict: the load average reached" in namespace["newton_words"]


def one_off_record(base: dict, newton: list, pypln: list) -> dict:
    """`base` with a one-off race of those rounds, each side's control tied to it."""
    times = {
        "Newton, cold": newton,
        "pyPLNmodels fit(), cold": pypln,
        "Newton, cold (control)": newton[::-1],
        "pyPLNmodels fit(), cold (control)": pypln[::-1],
    }
    return base | {"one-off race": {"times": times, "Newton iterations": 728}}


def test_the_pln_page_shows_the_one_off_race_when_recorded_and_says_so_when_not(
    monkeypatch,
):
    recorded = {name: peers.recording(name) for name in RECORDINGS}
    monkeypatch.setattr(peers, "recording", recorded.get)  # no one-off.json
    namespace, _ = run_page_section()
    assert namespace["one_off_words"].startswith("No one-off race is recorded yet")
    once = one_off_record(
        recorded["newton-tenth"], [3.0, 3.1, 3.0, 3.2, 3.0], [9.0, 9.2, 9.1, 9.0, 9.3]
    )
    monkeypatch.setattr(peers, "recording", (recorded | {"one-off": once}).get)
    namespace, _ = run_page_section()
    words = namespace["one_off_words"]
    assert "One-off, the Newton fit was 3.0 times faster than pyPLNmodels' fit" in words
    assert "728 iterations" in words
    busy = made_busy(once)
    monkeypatch.setattr(peers, "recording", (recorded | {"one-off": busy}).get)
    namespace, _ = run_page_section()
    assert "No verdict: the load average reached 7.5" in namespace["one_off_words"]


def test_a_one_off_control_that_fails_makes_the_recording_unfit():
    base = peers.recording("newton-tenth")
    once = one_off_record(base, [3.0] * 5, [9.0] * 5)
    assert peers.one_off_verdict(once).faster
    once["one-off race"]["times"]["Newton, cold (control)"] = [9.0] * 5
    reasons = conditions.unfit_reasons(once)
    assert any("the control failed: Newton, cold was" in r for r in reasons), reasons
    assert peers.one_off_verdict(once) is None


@pytest.mark.parametrize("name", RECORDINGS)
def test_the_recording_fills_every_timing_cell_and_is_fit_to_compare(name):
    recorded = peers.recording(name)
    names = {row["level"] for row in recorded["rows"]}
    assert set(peers.VARIANTS) <= names and "fast" in names
    for row in recorded["rows"]:
        for column in (
            "first call s",
            "ms / iter (min)",
            "ms / iter (median)",
            "ms / iter (max)",
        ):
            assert isinstance(row[column], int | float) and row[column] > 0, (
                row["level"],
                column,
            )
        assert row["rounds"] >= 5  # enough rounds for a decisive verdict
    assert recorded["fit to compare"] and not conditions.unfit_reasons(recorded)
    cond = recorded["conditions"]
    assert cond["JAX"]["cores"] == cond["peer"]["cores"]
    for key in (
        "machine",
        "cpu",
        "book commit",
        "load average at start",
        "load average at end",
    ):
        assert recorded[key]
    assert (
        recorded["peer"]["torch"].startswith("2.13.0")
        and recorded["peer"]["pyPLNmodels"] == "1.0.10"
    )
    assert peers.newton_race(recorded).rounds >= 5 and recorded["pypln"]["iterations"]


def test_the_unfit_recordings_of_a_busy_machine_are_gone():
    assert not any(
        (peers.RECORDINGS / f"{name}.json").exists()
        for name in ("default-threads", "one-thread", "newton")
    )


def test_the_peer_script_runs_in_an_interpreter_without_jitbook(tmp_path):
    """The peers' interpreter has torch and pyPLNmodels, not jitbook: the script runs
    from a copy of the two files it needs, with `import jitbook` failing, and answers."""
    import subprocess

    script = tmp_path / "book" / "chapters" / "pln" / "peers.py"
    script.parent.mkdir(parents=True)
    script.write_text(Path(peers.__file__).read_text())
    (tmp_path / "book" / "paths.py").write_text(
        (Path(jitbook.__file__).parent / "paths.py").read_text()
    )
    no_jitbook = (
        "import runpy, sys; sys.modules['jitbook'] = None; "  # import jitbook fails
        f"sys.argv = [{str(script)!r}, 'serve']; "
        f"runpy.run_path({str(script)!r}, run_name='__main__')"
    )
    requests = [{"op": "ping"}, {"op": "setup", "data": "none.npz", "n_iter": 1}]
    done = subprocess.run(
        [sys.executable, "-P", "-c", no_jitbook],
        input="".join(json.dumps(r) + "\n" for r in requests),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == 0 and answers[0] == {}, done.stderr
    if peers.peers_missing() is not None:  # no torch here: the script says so
        assert "torch is not installed" in answers[1]["error"]
