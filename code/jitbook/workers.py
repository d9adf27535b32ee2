"""Where the book's long jobs run (a class's grading, the ledger's releases): Dask
workers, a local cluster by default or an existing one at a scheduler's address.
"""

import contextlib
import importlib.util
import logging
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from distributed import Client

SCHEDULER_ENV = "DASK_SCHEDULER_ADDRESS"
WORKER_WAIT = 60.0  # seconds a given scheduler may take to have a worker


def scheduler_address(scheduler: str | None, workers: int | None) -> str | None:
    """The scheduler to use (``None``: a local cluster); refuses ``workers`` with
    one, since a given cluster's workers are its own.
    """
    address = scheduler or os.environ.get(SCHEDULER_ENV)
    if address and workers:
        raise ValueError(
            "--workers sizes the local cluster; with --scheduler the cluster's own "
            "workers run the tasks (start more of them there)."
        )
    if workers is not None and workers < 1:
        raise ValueError(f"--workers must be 1 or more, not {workers}.")
    return address


@contextlib.contextmanager
def connect(
    scheduler: str | None = None, workers: int | None = None, log=print
) -> Iterator["Client"]:
    """A client on ``scheduler`` (or ``$DASK_SCHEDULER_ADDRESS``), else on a local
    cluster of ``workers`` single-threaded processes (default: one per core).
    """
    # here, not at the top: the classroom's sandbox and the ledger's plugin import this
    # module in the older releases' venvs, which have no Dask
    from distributed import Client, LocalCluster

    address = scheduler_address(scheduler, workers)
    if address:
        try:
            client = Client(address, timeout="20s")
        except OSError as err:
            raise ValueError(
                f"no Dask scheduler answered at {address} ({err}); start one with "
                "`dask scheduler`, or leave --scheduler out to run on this machine."
            ) from None
        with client:
            try:
                client.wait_for_workers(1, timeout=WORKER_WAIT)
            except TimeoutError:
                raise ValueError(
                    f"the scheduler at {address} had no worker after {WORKER_WAIT:g} "
                    f"s; start some with `dask worker {address} --nthreads 1`."
                ) from None
            yield client
        return
    n = workers or os.cpu_count() or 1
    log(f"starting a local Dask cluster: {n} worker process(es), 1 thread each")
    with (
        LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=True,
            memory_limit=0,  # the jobs' own processes have budgets; Dask's is not one
            dashboard_address=":0",  # a free port: 8787 may be another cluster's
            silence_logs=logging.ERROR,
        ) as local,
        Client(local) as client,
    ):
        yield client


def has_dashboard() -> bool:
    """Dask's dashboard needs bokeh, which the book does not install."""
    return importlib.util.find_spec("bokeh") is not None


def say_dashboard(client: "Client", log=print) -> None:
    """Where Dask's dashboard is, or how to get one."""
    if has_dashboard() and client.dashboard_link:
        log(f"Dask's dashboard: {client.dashboard_link}", flush=True)
    else:
        log("(Dask's dashboard needs bokeh: pip install bokeh)", flush=True)
