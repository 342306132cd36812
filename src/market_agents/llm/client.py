"""One client in front of every provider: budget → cache → provider (bounded retries) →
pricing → budget charge → store.

``complete_many`` sends a batch concurrently (bounded globally and per route) and returns
results in input order; budget checks and charges run in input order before and after the
batch, so results never depend on which answer arrived first.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from market_agents.core import canonical_json
from market_agents.errors import BudgetExceeded, MarketAgentsError
from market_agents.llm.budget import Budget
from market_agents.llm.cache import ResponseCache
from market_agents.llm.config import LLMConfig
from market_agents.llm.pricing import PriceTable, load_prices
from market_agents.llm.providers.base import Provider, ProviderError
from market_agents.llm.providers.registry import load_env, make_provider
from market_agents.llm.types import LLMRequest, LLMResponse, LLMResult, Usage, usage_summary

Parse = Callable[[str], Any]


class ProviderAuthError(MarketAgentsError):
    """A provider rejected the key: every further call would fail, so the run stops."""


class ProviderUnavailable(MarketAgentsError):
    """No connection to a provider even after the retries: an outage is not data, so the run
    stops and nothing is recorded (timeouts, 429 and 5xx that outlast the retries are data:
    they are recorded and the agent holds)."""


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 4
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_delay_s)
        return min(self.base_delay_s * 2**attempt, self.max_delay_s)


def classify_parse_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "schema"
    if isinstance(exc, json.JSONDecodeError):
        return "invalid_json"
    return "invalid"


def _parsed_json(text: str, parse: Parse) -> Any:
    """The parsed answer as stored in the library (None when invalid). Reads re-parse the
    text, which stays the record; this copy saves library builders a parse."""
    try:
        obj = parse(text)
    except (ValueError, ValidationError):
        return None
    return obj.model_dump(mode="json") if hasattr(obj, "model_dump") else obj



class LLMClient:
    def __init__(
        self,
        providers: Mapping[str, Provider],
        prices: PriceTable,
        cache: ResponseCache | None = None,
        budget: Budget | None = None,
        max_concurrency: int = 16,
        route_concurrency: Mapping[str, int] | None = None,
        retry: Mapping[str, RetryPolicy] | None = None,
    ):
        self.providers = dict(providers)
        self.prices = prices
        self.cache = cache
        self.budget = budget or Budget(usd_cap=None)
        self.max_concurrency = max_concurrency
        self.route_concurrency = dict(route_concurrency or {})
        self.retry = dict(retry or {})
        self.counts: Counter[str] = Counter()
        self.tokens: Counter[str] = Counter()
        self.usd = 0.0
        self.usd_spent = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._sems: dict[str, asyncio.Semaphore] = {}
        self.sleep = asyncio.sleep  # the backoff wait (tests record it instead)

    # --- construction ---------------------------------------------------------------------

    @classmethod
    def from_settings(
        cls,
        llm: LLMConfig,
        cache_path: str | Path | None = None,
        prices: PriceTable | None = None,
        env: Mapping[str, str] | None = None,
    ) -> LLMClient:
        """Build every route's provider and check, before any call: each model has a price,
        each live route has its key, and live spend has a cap."""
        prices = prices or load_prices()
        if env is None:
            load_env()
        providers: dict[str, Provider] = {}
        for route in llm.routes():
            for model in llm.model_ids(route):
                prices.price(model)
            providers[route] = make_provider(llm.kind(route), route, llm.settings(route), env)
        live = [r for r, p in providers.items() if p.live]
        if live and llm.usd_cap <= 0:
            raise MarketAgentsError(
                f"population.llm.usd_cap is {llm.usd_cap}: live provider(s) {live} need a "
                "positive per-run cap"
            )
        caps = {r: llm.settings(r).usd_cap for r in providers
                if llm.settings(r).usd_cap is not None}
        profile = llm.token_profile
        budget = Budget(
            usd_cap=llm.usd_cap if llm.usd_cap > 0 else None,  # 0: no cap (mock runs only)
            provider_caps=caps,
            decision_cap=llm.decision_cap,
            planned=lambda m: prices.planned_cost(m, profile.tokens_in, profile.tokens_out),
        )
        return cls(
            providers,
            prices,
            cache=ResponseCache(cache_path) if cache_path else None,
            budget=budget,
            max_concurrency=llm.max_concurrency,
            route_concurrency={r: llm.settings(r).max_concurrency for r in providers},
            retry={r: RetryPolicy(max_retries=llm.settings(r).max_retries,
                                  base_delay_s=llm.settings(r).backoff_s) for r in providers},
        )

    # --- the batch ------------------------------------------------------------------------

    def complete_many(self, requests: Sequence[LLMRequest], parse: Parse | None = None,
                      where: str = "") -> list[LLMResult]:
        """Results in input order. ``parse(text)`` returns the parsed object or raises
        (``ValueError``/``ValidationError``: invalid answer); None: free text."""
        if not requests:
            return []
        loop = self._ensure_loop()
        fut = asyncio.run_coroutine_threadsafe(self._batch(list(requests), parse, where), loop)
        return fut.result()

    async def _batch(self, requests: list[LLMRequest], parse: Parse | None,
                     where: str) -> list[LLMResult]:
        n = len(requests)
        results: list[LLMResult | None] = [None] * n
        reserved: dict[int, float] = {}
        entries: dict[int, dict] = {}
        hits: set[int] = set()
        for i, req in enumerate(requests):
            route = self._route(req)
            try:
                reserved[i] = self.budget.admit(req.agent, route, req.model, where)
            except BudgetExceeded as exc:
                scope = getattr(exc, "scope", "budget_halt")
                results[i] = self._blocked(req, scope)
                self.counts[scope] += 1
                continue
            entry = self.cache.get(req.key()) if self.cache is not None else None
            if entry is not None:
                entries[i] = entry
                hits.add(i)
        # one call per distinct request: a repeat within the batch reads the first one's record,
        # as it would from the cache on a replay
        first: dict[str, int] = {}
        for i in reserved:
            if i not in hits:
                first.setdefault(requests[i].key(), i)
        todo = list(first.values())
        fetched = await asyncio.gather(*(self._fetch(requests[i]) for i in todo))
        for i, entry in zip(todo, fetched, strict=True):
            entries[i] = entry
            if entry["status"] == "answered" and parse is not None:
                entry["parsed"] = _parsed_json(entry["text"], parse)
            if self.cache is not None:
                self.cache.put(requests[i].key(), entry)
        for i in reserved:
            if i not in entries:
                entries[i] = entries[first[requests[i].key()]]
                hits.add(i)
        for i in sorted(reserved):  # input order: charges never depend on arrival order
            req, entry = requests[i], entries[i]
            route = self._route(req)
            live = self.providers[route].live
            answered = entry["status"] == "answered"
            self.budget.settle(route, req.model, reserved[i],
                               entry["usd"] if answered else None)
            results[i] = self._result(req, entry, parse, cache_hit=i in hits, live=live)
        return results  # type: ignore[return-value]

    async def _fetch(self, req: LLMRequest) -> dict:
        route = self._route(req)
        provider = self.providers[route]
        policy = self.retry.get(route, RetryPolicy())
        start = time.monotonic()
        attempts = 0
        async with self._sem("*", self.max_concurrency), \
                self._sem(route, self.route_concurrency.get(route, self.max_concurrency)):
            while True:
                attempts += 1
                try:
                    resp = await provider.complete(req)
                    break
                except ProviderError as exc:
                    if exc.error_class == "auth":
                        raise ProviderAuthError(f"provider {route!r}: {exc}") from None
                    if provider.is_retryable(exc) and attempts <= policy.max_retries:
                        await self.sleep(policy.delay(attempts - 1, exc.retry_after))
                        continue
                    if exc.error_class == "connection":
                        raise ProviderUnavailable(
                            f"provider {route!r}: cannot connect after {attempts} attempts "
                            f"({exc}); check its base_url and that it is running") from None
                    self.counts["calls"] += attempts
                    return self._entry(req, None, exc.error_class, attempts,
                                       time.monotonic() - start)
        self.counts["calls"] += attempts
        return self._entry(req, resp, None, attempts, time.monotonic() - start)

    def _entry(self, req: LLMRequest, resp: LLMResponse | None, error: str | None,
               attempts: int, elapsed: float) -> dict:
        payload = req.key_payload()
        if payload.get("json_schema") is not None:  # ~1 kB per entry, the same in every entry
            payload["json_schema"] = {"sha256": hashlib.sha256(
                canonical_json(payload["json_schema"]).encode()).hexdigest()}
        body: dict[str, Any] = {
            "request": payload,
            "status": "failed" if resp is None else "answered",
            "error_class": error,
            "attempts": attempts,
            "elapsed_s": round(elapsed, 6),
            "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        if resp is not None:
            body.update(
                text=resp.text, refusal=resp.refusal, truncated=resp.truncated,
                served_model=resp.model, usage=resp.usage.to_dict(),
                latency_s=round(resp.latency_s, 6),
                usd=self.prices.cost(req.model, resp.usage),
            )
        return body

    def _result(self, req: LLMRequest, entry: dict, parse: Parse | None, cache_hit: bool,
                live: bool) -> LLMResult:
        key = req.key()
        if entry["status"] != "answered":
            self.counts["failures"] += 1
            return LLMResult(key, None, None, None, entry["error_class"] or "failed", Usage(),
                             0.0, 0.0, cache_hit, 0.0, 0 if cache_hit else entry["attempts"])
        usage = Usage.from_dict(entry["usage"])
        text = entry["text"]
        parsed, valid, error = None, True, None
        if entry.get("refusal"):
            valid, error = False, "refusal"
        elif parse is not None:
            try:
                parsed = parse(text)
            except (ValueError, ValidationError) as exc:
                valid = False
                error = "truncated" if entry.get("truncated") else classify_parse_error(exc)
        elif not text:
            valid, error = False, "empty"
        spent = 0.0 if cache_hit or not live else float(entry["usd"])
        self.counts["cache_hits" if cache_hit else "answered"] += 1
        self.counts["valid" if valid else "invalid"] += 1
        for name, value in usage.to_dict().items():
            self.tokens[name] += value
        self.usd += float(entry["usd"])
        self.usd_spent += spent
        return LLMResult(key, text, parsed, valid, error, usage, float(entry["usd"]), spent,
                         cache_hit, float(entry["latency_s"]),
                         0 if cache_hit else entry["attempts"])

    @staticmethod
    def _blocked(req: LLMRequest, scope: str) -> LLMResult:
        return LLMResult(req.key(), None, None, None, scope, Usage(), 0.0, 0.0, False, 0.0, 0)

    def _route(self, req: LLMRequest) -> str:
        route = req.route or req.provider
        if route not in self.providers:
            raise MarketAgentsError(f"request for provider route {route!r}, which this client "
                                    f"does not have (has {sorted(self.providers)})")
        return route

    # --- bookkeeping ----------------------------------------------------------------------

    def usage_summary(self) -> dict[str, Any]:
        return usage_summary(self.counts, self.tokens, self.usd, self.usd_spent,
                             list(self.budget.halts),
                             len(self.cache.corrupt) if self.cache else 0)

    def _sem(self, name: str, size: int) -> asyncio.Semaphore:
        if name not in self._sems:
            self._sems[name] = asyncio.Semaphore(size)
        return self._sems[name]

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        # One long-lived loop in a daemon thread: the SDKs' async HTTP clients stay bound to
        # it across batches, and complete_many works from sync and async callers alike.
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                            name="llm-client-loop")
            self._thread.start()
        return self._loop

    def close(self) -> None:
        if self._loop is not None:
            async def _close_all():
                for p in self.providers.values():
                    await p.aclose()

            asyncio.run_coroutine_threadsafe(_close_all(), self._loop).result(timeout=30)
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread is not None:
                self._thread.join(timeout=10)
            self._loop.close()
            self._loop = None
        if self.cache is not None:
            self.cache.close()
