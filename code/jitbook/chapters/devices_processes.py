"""jit across processes: one process of a multi-process run (``worker``), and the run
of several on loopback (``run_processes``). Run as ``python -m
jitbook.chapters.devices_processes`` it is one such process.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time

import jax

from jitbook.chapters.devices import (
    data_mesh,
    fit_placed,
    place_local_rows,
    process_rows,
    use_cpu_devices,
)
from jitbook.chapters.pln import load_oaks
from jitbook.paths import CODE

# --- more than one process ------------------------------------------------------------

RESULT_MARK = "JITBOOK-RESULT "


def worker(
    process_id: int,
    num_processes: int,
    port: int,
    devices_per_process: int,
    repeat: int,
    n_iter: int,
) -> dict:
    """One process of a multi-process run: join the others, fit PLN data-parallel over
    every process's devices.

    Taught in jit across devices and processes, More than one process.
    """
    use_cpu_devices(devices_per_process)
    jax.config.update(
        "jax_cpu_collectives_implementation", "gloo"
    )  # CPU collectives across processes
    jax.distributed.initialize(
        f"127.0.0.1:{port}",
        num_processes=num_processes,
        process_id=process_id,
        initialization_timeout=30,
    )
    try:
        mesh = data_mesh()  # every device of every process
        local = process_rows(load_oaks(repeat))  # this process's rows only
        placed, params, Omega = place_local_rows(local, mesh)
        losses = fit_placed(placed, params, Omega, n_iter, mesh)
        return {
            "process": jax.process_index(),
            "processes": jax.process_count(),
            "local devices": jax.local_device_count(),
            "global devices": jax.device_count(),
            "Y local rows": local.Y.shape[0],
            "Y global shape": list(placed.Y.shape),
            "Y local shards": [list(s.data.shape) for s in placed.Y.addressable_shards],
            "losses": losses.tolist(),
        }
    finally:
        jax.distributed.shutdown()


def free_port() -> int:
    """A TCP port on the loopback interface that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_processes(
    num_processes: int = 2,
    devices_per_process: int = 2,
    repeat: int = 4,
    n_iter: int = 10,
    timeout: float = 90.0,
) -> list[dict]:
    """Start ``num_processes`` local processes running ``worker`` on loopback; return
    their results.

    Any process failing or the time limit passing stops them all with a clear error,
    never a hang. Taught in jit across devices and processes, More than one process.
    """
    port = free_port()
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(CODE), os.environ.get("PYTHONPATH", "")]),
    )
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jitbook.chapters.devices_processes",
                str(i),
                str(num_processes),
                str(port),
                str(devices_per_process),
                str(repeat),
                str(n_iter),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(num_processes)
    ]
    deadline = time.monotonic() + timeout
    try:
        while any(p.poll() is None for p in procs):
            failed = [p for p in procs if p.poll() not in (None, 0)]
            if failed or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        outputs = [p.communicate() for p in procs]
    codes = [p.returncode for p in procs]
    failed = [
        i for i, code in enumerate(codes) if code not in (0, -9)
    ]  # -9: stopped by us
    if failed or any(code != 0 for code in codes):
        i = failed[0] if failed else codes.index(-9)
        why = (
            f"exited with code {codes[i]}"
            if failed
            else f"did not finish within {timeout:g} s and was stopped"
        )
        tail = "\n".join(outputs[i][1].strip().splitlines()[-5:])
        raise RuntimeError(
            f"process {i} of {num_processes} {why}. Its last error lines:\n{tail}"
        )
    results = []
    for i, (out, _) in enumerate(outputs):
        lines = [line for line in out.splitlines() if line.startswith(RESULT_MARK)]
        if not lines:
            raise RuntimeError(
                f"process {i} of {num_processes} ended without printing its result."
            )
        results.append(json.loads(lines[-1][len(RESULT_MARK) :]))
    return results


def main(argv: list[str] | None = None) -> None:
    """The command line of one process:

    ``python -m jitbook.chapters.devices_processes PROCESS_ID NUM_PROCESSES PORT
    DEVICES_PER_PROCESS REPEAT N_ITER``.
    """
    parser = argparse.ArgumentParser(
        description="One process of the chapter's multi-process PLN fit."
    )
    for name in (
        "process_id",
        "num_processes",
        "port",
        "devices_per_process",
        "repeat",
        "n_iter",
    ):
        parser.add_argument(name, type=int)
    args = parser.parse_args(argv)
    print(RESULT_MARK + json.dumps(worker(**vars(args))), flush=True)


if __name__ == "__main__":
    main()
