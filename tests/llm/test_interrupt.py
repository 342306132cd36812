"""An interrupt (Ctrl-C, SIGTERM) while a batch is in flight: no further call starts, calls in
flight finish within the stop grace and are stored, the rest are cancelled, and no claim is
left behind (llm/interrupt.py). The interrupt is raised in the main thread, as the signal
does; releases wait for the drain to begin, so no count depends on timing."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading

import pytest

from market_agents.cli import main, sigterm_as_interrupt
from market_agents.errors import ConfigError, Terminated
from market_agents.llm import schema
from market_agents.llm.cache import ResponseCache
from market_agents.llm.client import LLMClient
from market_agents.llm.interrupt import DEFAULT_STOP_GRACE_S, STOP_GRACE_ENV, stop_grace_s
from market_agents.llm.pricing import load_prices
from market_agents.llm.providers.base import Provider
from market_agents.llm.types import LLMResponse, Usage
from tests.support.llm import decision_request

GOOD = json.dumps({"action": "hold", "asset": 0, "quantity": 0, "order_type": "market",
                   "limit_price": None, "message": "", "reason": "wait"})


class Held(Provider):
    """A live provider whose answers wait until ``release`` is set (or forever)."""

    kind, live = "openai", True

    def __init__(self):
        super().__init__("openai")
        self.release = threading.Event()
        self.started = 0

    async def complete(self, request):
        self.started += 1
        while not self.release.is_set():
            await asyncio.sleep(0.005)
        return LLMResponse(GOOD, Usage(input=760, output=230), latency_s=0.01)


def _client(tmp_path, provider):
    return LLMClient({"openai": provider}, load_prices(), cache=ResponseCache(tmp_path / "c"),
                     max_concurrency=2)


def _requests(n):
    return [decision_request("openai", "openai", "gpt-5.4-nano", agent=f"slot{i}", tick=i)
            for i in range(n)]


@pytest.fixture(autouse=True)
def _sigint_raises_keyboard_interrupt():
    """These tests interrupt themselves with SIGINT: Python's own handler must be the one
    installed. A process started with SIGINT ignored (a background job of a non-interactive
    shell: `make test &`) keeps it ignored, and the self-interrupting tests waited forever."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _when(cond, then):
    """In a helper thread: once ``cond()`` holds, call ``then()``."""

    def loop():
        while not cond():
            threading.Event().wait(0.002)
        then()

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    return t


def _state(tmp_path):
    cache = ResponseCache(tmp_path / "c", readonly=True)
    try:
        return len(cache), cache.claims()
    finally:
        cache.close()


def test_sigterm_lets_calls_in_flight_finish_and_sends_no_more(tmp_path):
    p = Held()
    client = _client(tmp_path, p)
    # SIGTERM once both calls are in flight; their answers come once the drain has begun
    _when(lambda: p.started == 2, lambda: os.kill(os.getpid(), signal.SIGTERM))
    _when(lambda: client._draining, p.release.set)
    with sigterm_as_interrupt(), pytest.raises(Terminated, match="SIGTERM"):
        client.complete_many(_requests(4), schema.parse_decision)
    client.close()
    # the two answers in flight were stored; the two requests not yet sent never were
    assert p.started == 2
    assert _state(tmp_path) == (2, [])


def test_ctrl_c_after_the_grace_cancels_and_releases_every_claim(tmp_path, monkeypatch):
    monkeypatch.setenv(STOP_GRACE_ENV, "0.05")
    p = Held()  # never answers
    client = _client(tmp_path, p)
    _when(lambda: p.started == 2, lambda: os.kill(os.getpid(), signal.SIGINT))
    with pytest.raises(KeyboardInterrupt):
        client.complete_many(_requests(4), schema.parse_decision)
    client.close()
    assert p.started == 2
    assert _state(tmp_path) == (0, [])  # nothing arrived, and no claim is left


def test_an_interrupt_as_the_batch_is_handed_to_the_loop_is_drained_too(tmp_path, monkeypatch):
    """The signal's handler can run as ``run_coroutine_threadsafe`` returns, when the loop's
    thread already started calls (a loaded machine hands it the GIL first): those calls are
    drained as any others, and no claim is left (they were left running, their claims
    pending, and a later batch waited on them for ever)."""
    monkeypatch.setenv(STOP_GRACE_ENV, "0.05")
    p = Held()  # never answers
    client = _client(tmp_path, p)
    submit, first = asyncio.run_coroutine_threadsafe, [True]

    def interrupted(coro, loop):
        future = submit(coro, loop)
        if first:  # the batch's hand-over only, not the drain's
            first.clear()
            while p.started < 2:
                threading.Event().wait(0.002)
            raise KeyboardInterrupt
        return future

    monkeypatch.setattr(asyncio, "run_coroutine_threadsafe", interrupted)
    with pytest.raises(KeyboardInterrupt):
        client.complete_many(_requests(4), schema.parse_decision)
    client.close()
    assert p.started == 2
    assert _state(tmp_path) == (0, [])


def test_the_client_works_again_after_a_drained_interrupt(tmp_path):
    p = Held()
    client = _client(tmp_path, p)
    _when(lambda: p.started == 1, lambda: os.kill(os.getpid(), signal.SIGINT))
    _when(lambda: client._draining, p.release.set)
    with pytest.raises(KeyboardInterrupt):
        client.complete_many(_requests(1), schema.parse_decision)
    results = client.complete_many(_requests(3), schema.parse_decision)
    client.close()
    assert [r.cache_hit for r in results] == [True, False, False] and p.started == 3


def test_sigterm_handler_is_restored():
    before = signal.getsignal(signal.SIGTERM)
    with sigterm_as_interrupt():
        assert signal.getsignal(signal.SIGTERM) is not before
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.parametrize("raw, want", [("", DEFAULT_STOP_GRACE_S), ("0", 0.0), ("2.5", 2.5)])
def test_stop_grace(raw, want):
    assert stop_grace_s({STOP_GRACE_ENV: raw}) == want


@pytest.mark.parametrize("raw", ["ten", "-1", "nan", "inf"])
def test_bad_stop_grace_is_refused_in_one_line_before_any_work(raw, monkeypatch, capsys,
                                                              tmp_path):
    with pytest.raises(ConfigError, match=f"{STOP_GRACE_ENV}="):
        stop_grace_s({STOP_GRACE_ENV: raw})
    monkeypatch.setenv(STOP_GRACE_ENV, raw)
    assert main(["schema", "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and STOP_GRACE_ENV in err
    assert not (tmp_path / "s").exists()
