"""A paying command told to stop (Ctrl-C, or SIGTERM: a SLURM time limit or preemption,
systemd, ``kill``) while a batch of calls is in flight.

The main thread waits on the batch, which runs on the client's event loop thread; the
interrupt is raised in the main thread. :func:`drain` then stops admitting calls (a request
not yet sent is never sent, its claim released), lets the calls in flight finish within the
stop grace, each stored the moment it arrives as always, and cancels what is still running
at the grace's end (its claim released). Only then does the interrupt go on, so the process
leaves no claim behind and every answer it received is in the record: the same command
resumes without paying for any of them again. A call cut off at the grace's end may have been
billed by the provider; it is the only one sent again on resume.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from market_agents.errors import ConfigError

# The grace is read where `ma` reads its environment (the CLI checks it at start-up without
# loading this layer); named here too for the callers of this module.
from market_agents.inputs import DEFAULT_STOP_GRACE_S, stop_grace_s
from market_agents.inputs import STOP_GRACE_ENV as STOP_GRACE_ENV

if TYPE_CHECKING:  # a type in annotations only
    import concurrent.futures

WAKE_S = 0.25  # the longest a waiting main thread takes to run a signal's handler
_CANCEL_WAIT_S = 10.0  # a cancelled call only releases its claim: this is slack, not work


def drain(loop: asyncio.AbstractEventLoop, batch: concurrent.futures.Future,
          stop: Callable[[], None], grace_s: float | None = None) -> None:
    """Bring a batch interrupted in the main thread to an end that loses nothing received.

    Args:
        loop: the client's event loop (its thread runs the batch; every task on it is the
            client's).
        batch: the batch's future (``asyncio.run_coroutine_threadsafe``).
        stop: called first: from then on no request of the batch is sent.
        grace_s: seconds the calls in flight may take (default :func:`stop_grace_s`).

    Returns:
        None, once no task of the client runs: every call either finished and was stored,
        or was cancelled and its claim released. A second interrupt during the grace cuts
        it short (the calls still running are cancelled at once).
    """
    stop()
    try:
        grace = stop_grace_s() if grace_s is None else grace_s
    except ConfigError:  # checked at start-up; never let it replace the interrupt
        grace = DEFAULT_STOP_GRACE_S
    # BaseException: the batch's own end (its skipped requests), the grace over, or a second
    # Ctrl-C / SIGTERM: each means the same here, go on to cancel what still runs
    end = time.monotonic() + grace
    with contextlib.suppress(BaseException):
        while not batch.done() and time.monotonic() < end:  # in slices, as complete_many waits
            with contextlib.suppress(TimeoutError):
                batch.result(timeout=min(WAKE_S, max(end - time.monotonic(), 0.0)))
    if batch.done() or not loop.is_running():
        return

    async def cancel_all() -> None:
        me = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not me]
        for t in tasks:
            t.cancel()  # a cancelled call releases its claim (LLMClient._fetch_and_store)
        await asyncio.gather(*tasks, return_exceptions=True)

    with contextlib.suppress(BaseException):
        asyncio.run_coroutine_threadsafe(cancel_all(), loop).result(timeout=_CANCEL_WAIT_S)
