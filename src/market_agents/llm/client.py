"""One client in front of every provider: cache look-up → budget reservation of the call's
worst case → a claim on the request in the cache (so no other process pays for it) → provider
(bounded retries) → price → store the answer at once → settle the reservation (the steps are
listed on :class:`LLMClient`).

``complete_many`` sends a batch concurrently (bounded globally and per route) and returns
results in input order. Budget admission runs in input order before the batch and charges in
input order after it, so results never depend on which answer arrived first; each answer (and
each final failure) is stored the moment it arrives, so a kill loses only requests in flight.

Provider errors come in two kinds. Transient ones (rate limits, 5xx/529, timeouts, dropped
connections, a Responses object with ``status: failed``) are retried with backoff, then stored
as the request's failure: part of the record, reproduced by a replay. Fatal ones (quota
exhausted, invalid request, authentication/permission, unknown model) stop the run at once
with :class:`ProviderFatal`; nothing is stored for that request. An error object inside an
HTTP 200 is a provider error of the class its type names, under the same rules.

Nothing the provider may have billed goes unrecorded: an HTTP 200 the SDK cannot read is an
invalid answer of class ``unparseable``, stored and charged at its worst case, never retried;
an attempt that timed out after its request was sent is charged at its worst case too (a retry
of it first reserves another worst case); an answer the cache cannot store is kept beside it
(:meth:`ResponseCache.keep`) and named in the error that stops the run.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import sys
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from market_agents.core import canonical_json
from market_agents.errors import BudgetExceeded, MarketAgentsError
from market_agents.llm import interrupt
from market_agents.llm.budget import Budget
from market_agents.llm.cache import CacheError, ResponseCache, answer_sha256, process_identity
from market_agents.llm.calls import (
    Parse,
    ProviderAuthError,
    ProviderFatal,
    ProviderUnavailable,
    ReplayMiss,
    ReplayOnly,
    RetryPolicy,
    classify_parse_error,
    parsed_json,
    usage_missing,
)

# the rule a stored answer is judged by, named here too for the callers that import it from here
from market_agents.llm.calls import is_valid_entry as is_valid_entry
from market_agents.llm.config import LLMConfig
from market_agents.llm.pricing import PriceTable, load_prices
from market_agents.llm.providers.base import FATAL_NAMES, Provider, ProviderError
from market_agents.llm.providers.registry import load_env, make_provider
from market_agents.llm.types import LLMRequest, LLMResponse, LLMResult, Usage

DEFAULT_TIMEOUT_S = 60.0  # an attempt's deadline when neither the request nor its route sets one
UNPARSEABLE = "unparseable"  # the class of a billed HTTP 200 that could not be read as an answer


class _Skipped(Exception):
    """A request not sent because another request of the batch stopped the run."""


def _warn_stderr(message: str) -> None:
    print(f"market_agents: warning: {message}", file=sys.stderr, flush=True)


async def _settle(into: concurrent.futures.Future, batch: Any) -> None:
    """Await ``batch`` (a coroutine) on the loop and settle ``into`` with its result or its
    exception (a cancellation included), as ``run_coroutine_threadsafe``'s own future is."""
    try:
        result = await batch
    except BaseException as exc:
        into.set_exception(exc)
        raise
    into.set_result(result)


class LLMClient:
    """One client in front of every provider route of a run; the only way the package calls
    an LLM.

    Each request of a batch goes, in this order (the code's order, ``complete_many``):

    1. cache: look the request up (:meth:`LLMRequest.key`);
    2. budget: reserve the call's worst case (:meth:`worst_case`), a cache hit included, or
       hold the agent (``budget_halt``, ``decision_cap``);
    3. claim: for a miss, claim the request in the cache, or wait for the process holding it;
    4. provider: call it, with bounded retries of transient errors;
    5. price: the answer's cost from the price table (USD);
    6. store: put the answer (or the final failure) in the cache at once;
    7. settle: release the reservation and charge the priced cost, in input order.

    Args:
        providers: route -> provider (``population.llm.provider_mix`` keys).
        prices: the price table (USD per 1M tokens per model).
        cache: the response cache (the record); None only for an uncached mock run.
        budget: the run's caps (default: no cap).
        max_concurrency: calls in flight at once, over all routes.
        route_concurrency: route -> calls in flight at once on that route.
        retry: route -> retry policy (default :class:`RetryPolicy`).
        timeouts: route -> seconds one attempt may take, body included (a wall-clock
            deadline; default 60); claim leases are derived from it.
        replay: serve every answer from the cache; a miss is :class:`ReplayMiss`.

    Raises:
        MarketAgentsError: ``replay`` without a cache.

    Protocol:
        Run protocol §1 (keys from ``.env`` only; hard spend limits) and §6 (the cache
        reproduces every run at zero USD). Reference: docs/llm.md, docs/cache.md.
    """

    def __init__(
        self,
        providers: Mapping[str, Provider],
        prices: PriceTable,
        cache: ResponseCache | None = None,
        budget: Budget | None = None,
        max_concurrency: int = 16,
        route_concurrency: Mapping[str, int] | None = None,
        retry: Mapping[str, RetryPolicy] | None = None,
        timeouts: Mapping[str, float] | None = None,
        replay: bool = False,
    ):
        self.providers = dict(providers)
        self.prices = prices
        self.cache = cache
        self.budget = budget or Budget(usd_cap=None)
        self.max_concurrency = max_concurrency
        self.route_concurrency = dict(route_concurrency or {})
        self.retry = dict(retry or {})
        self.timeouts = dict(timeouts or {})  # route -> attempt deadline in s (claim leases)
        self.replay = replay
        if replay and cache is None:
            raise MarketAgentsError("replay mode needs a response cache (--cache)")
        self.counts: Counter[str] = Counter()
        self.tokens: Counter[str] = Counter()
        self.retries_by_class: Counter[str] = Counter()
        self.failures_by_class: Counter[str] = Counter()
        self.charged_by_class: Counter[str] = Counter()  # charges at the worst case, by class
        self.charged_usd_by_class: Counter[str] = Counter()
        self.usd = 0.0
        self.usd_live = 0.0
        self.usd_spent = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._sems: dict[str, asyncio.Semaphore] = {}
        self._stop = False
        self._draining = False  # set by an interrupt: no call starts until it is handled
        # request key -> USD reserved for retries of attempts the provider may have billed
        self._retry_reserved: Counter[str] = Counter()
        self.sleep = asyncio.sleep  # the backoff wait (tests record it instead)
        self.warn = _warn_stderr  # says once per run that answers came without usage
        self.poll_s = (0.02, 0.5)  # first and longest wait between looks at a claimed request

    # --- construction ---------------------------------------------------------------------

    @classmethod
    def from_settings(
        cls,
        llm: LLMConfig,
        cache_path: str | Path | None = None,
        prices: PriceTable | None = None,
        env: Mapping[str, str] | None = None,
        replay: bool = False,
    ) -> LLMClient:
        """Build the client of a run from its ``population.llm`` settings, checking before any
        call that each model has a price, each live route has its key, and live spend has a
        cap.

        Args:
            llm: the run's ``population.llm`` config (routes, models, caps, provider settings).
            cache_path: the response cache directory, or None.
            prices: the price table (default: ``config/prices.yaml``, or the file named by
                ``MARKET_AGENTS_PRICES``).
            env: where keys are read (default: ``.env`` loaded into the environment).
            replay: serve from the cache only (a miss is :class:`ReplayMiss`); no provider
                client is built and no key is needed.

        Returns:
            The client, with a :class:`Budget` of the run's ``usd_cap``, provider caps and
            decision cap.

        Raises:
            ConfigError: a model without a price, a live route without its key, an
                ``openai_compatible`` route without a ``base_url``, an unknown provider kind.
            MarketAgentsError: a live provider with ``usd_cap`` 0 (no cap), or replay without
                a cache.
        """
        prices = prices or load_prices()
        replay = replay or llm.replay
        providers = cls._providers(llm, prices, env, replay)
        caps = {r: llm.settings(r).usd_cap for r in providers
                if llm.settings(r).usd_cap is not None}
        budget = Budget(
            usd_cap=llm.usd_cap if llm.usd_cap > 0 else None,  # 0: no cap (mock runs only)
            provider_caps=caps,
            decision_cap=llm.decision_cap,
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
            timeouts={r: llm.settings(r).timeout_s for r in providers},
            replay=replay,
        )

    @classmethod
    def check_settings(cls, llm: LLMConfig, env: Mapping[str, str] | None = None) -> None:
        """The checks :meth:`from_settings` makes before any call (prices, keys, base URLs,
        the per-run cap), without a client: a run that would stop on them stops before it is
        entered in the spend ledger.

        Raises:
            ConfigError, MarketAgentsError: as :meth:`from_settings`.
        """
        cls._providers(llm, load_prices(), env, llm.replay)

    @staticmethod
    def _providers(llm: LLMConfig, prices: PriceTable, env: Mapping[str, str] | None,
                   replay: bool) -> dict[str, Provider]:
        if env is None and not replay:
            load_env()
        providers: dict[str, Provider] = {}
        for route in llm.routes():
            for model in llm.model_ids(route):
                prices.price(model)
            kind = llm.kind(route)
            providers[route] = (ReplayOnly(route, kind) if replay
                                else make_provider(kind, route, llm.settings(route), env))
        live = [r for r, p in providers.items() if p.live]
        if live and llm.usd_cap <= 0:
            raise MarketAgentsError(
                f"population.llm.usd_cap is {llm.usd_cap}: live provider(s) {live} need a "
                "positive per-run cap"
            )
        return providers

    # --- the batch ------------------------------------------------------------------------

    def worst_case(self, req: LLMRequest) -> float:
        """USD the budget reserves before sending ``req``: its input-token bound and its
        ``max_output_tokens`` at full price."""
        return self.prices.worst_cost(req.model, req.input_token_bound(), req.max_output_tokens)

    def complete_many(self, requests: Sequence[LLMRequest], parse: Parse | None = None,
                      where: str = "", tick: int | None = None) -> list[LLMResult]:
        """Answer a batch of requests concurrently; results come back in input order.

        Budget admission runs in input order before the batch and charges in input order after
        it, so results never depend on which answer arrived first.

        Args:
            requests: the batch (the decisions due at one tick); a repeated request is sent
                once and its repeats read its record.
            parse: ``parse(text)`` returns the parsed answer or raises ``ValueError`` /
                ``ValidationError`` (an invalid answer); None: free text.
            where: a label for a budget halt (e.g. the run and tick).
            tick: the market tick, recorded with a budget halt.

        Returns:
            One :class:`LLMResult` per request, in input order: the answer, validity, usage,
            priced USD, cache hit, or the hold (``budget_halt``, ``decision_cap``, failure).

        Raises:
            ProviderFatal: quota, invalid request, auth or unknown model (nothing stored).
            ReplayMiss: a replay needs an answer the cache does not hold.
            ProviderUnavailable: no connection to a provider even after the retries.
            CacheError: the cache is damaged or cannot be written.
            KeyboardInterrupt: Ctrl-C, or SIGTERM (``errors.Terminated``), raised once no
                call is left running (:func:`interrupt.drain`: calls in flight finish within
                the stop grace, the rest are never sent or are cancelled, claims released).

        Each is raised after every answer already received is stored.
        """
        if not requests:
            return []
        loop = self._ensure_loop()
        # The batch's future exists before the loop is handed the batch: a signal whose handler
        # runs as the hand-over returns (the loop's thread may have started calls by then)
        # still finds the batch to drain.
        fut: concurrent.futures.Future = concurrent.futures.Future()
        try:
            asyncio.run_coroutine_threadsafe(
                _settle(fut, self._batch(list(requests), parse, where, tick)), loop)
            while True:
                try:
                    # in slices: the OS may hand a signal to another thread, which cannot wake
                    # this wait; the handler then runs here within a slice
                    return fut.result(timeout=interrupt.WAKE_S)
                except TimeoutError:
                    if fut.done():
                        raise
        except BaseException:  # Ctrl-C or SIGTERM (errors.Terminated) in this thread
            if not fut.done():  # the batch's own error needs no drain
                interrupt.drain(loop, fut, self._halt)
                self._draining = False
            raise

    async def _batch(self, requests: list[LLMRequest], parse: Parse | None, where: str,
                     tick: int | None) -> list[LLMResult]:
        self._stop = False
        results: list[LLMResult | None] = [None] * len(requests)
        reserved: dict[int, float] = {}
        entries: dict[int, dict] = {}
        hits: set[int] = set()
        for i, req in enumerate(requests):  # input order: admission never depends on latency
            route = self._route(req)
            entry = self.cache.get(req.key()) if self.cache is not None else None
            try:
                reserved[i] = self.budget.admit(req.agent, route, self.worst_case(req), where,
                                                tick)
            except BudgetExceeded as exc:
                scope = getattr(exc, "scope", "budget_halt")
                results[i] = self._blocked(req, scope)
                self.counts[scope] += 1
                continue
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
        if self.replay and todo:
            req = requests[todo[0]]
            raise ReplayMiss(
                f"replay: {len(todo)} request(s) of {where or 'this batch'} have no stored "
                f"answer in {self.cache.path}, e.g. {req.key()} ({req.agent or 'no agent'}, "
                f"{req.route or req.provider}/{req.model}); a replay makes no calls: run "
                "without --replay to fetch them")
        got = await asyncio.gather(*(self._obtain(requests[i], parse) for i in todo),
                                   return_exceptions=True)
        errors = [g for g in got if isinstance(g, BaseException) and not isinstance(g, _Skipped)]
        if errors:
            raise errors[0]  # the first failing request in input order
        if any(isinstance(g, _Skipped) for g in got):
            raise _Skipped  # an interrupt stopped the batch (interrupt.drain)
        for i, (entry, fresh) in zip(todo, got, strict=True):
            entries[i] = entry
            if not fresh:
                hits.add(i)
        for i in reserved:
            if i not in entries:
                entries[i] = entries[first[requests[i].key()]]
                hits.add(i)
        for i in sorted(reserved):  # input order: charges never depend on arrival order
            req, entry = requests[i], entries[i]
            route = self._route(req)
            # a failure is charged too when attempts the provider may have billed came first
            self.budget.settle(route, reserved[i] + self._retry_reserved.pop(req.key(), 0.0),
                               entry.get("usd"))
            results[i] = self._result(req, entry, parse, cache_hit=i in hits,
                                      live=self.providers[route].live)
        return results  # type: ignore[return-value]

    async def _obtain(self, req: LLMRequest, parse: Parse | None) -> tuple[dict, bool]:
        """(entry, fetched by this process) for a request missing from the cache: claim it
        and call the provider, or wait for the process that holds its claim."""
        route = self._route(req)
        key = req.key()
        wait = self.poll_s[0]
        waited = False
        while True:
            async with self._sem("*", self.max_concurrency), \
                    self._sem(route, self.route_concurrency.get(route, self.max_concurrency)):
                if self._stop or self._draining:
                    raise _Skipped
                state, info = ("mine", None) if self.cache is None else self.cache.claim(
                    key, self._lease(req, route))
                if state == "answer":
                    return info, False
                if state == "mine":
                    if info is not None:
                        self.counts["claims_taken_over"] += 1
                    return await self._fetch_and_store(req, route, parse)
            if not waited:
                self.counts["claim_waits"] += 1
                waited = True
            await asyncio.sleep(wait)  # a live process holds the claim: its answer will come
            wait = min(wait * 1.5, self.poll_s[1])

    async def _fetch_and_store(self, req: LLMRequest, route: str, parse: Parse | None
                               ) -> tuple[dict, bool]:
        try:
            entry = await self._fetch(req, route)
        except BaseException:
            self._stop = True  # no further request of this batch is sent
            if self.cache is not None:
                self.cache.release(req.key())
            raise
        if entry["status"] == "answered" and parse is not None:
            entry["parsed"] = parsed_json(entry["text"], parse)
        if self.cache is None:
            return entry, True
        paid = self.providers[route].live and entry["status"] == "answered"
        try:
            stored = self.cache.put(req.key(), entry, paid=paid)
        except CacheError as exc:
            self._stop = True
            raise self._unstored(req, route, entry, exc) from None
        except BaseException:
            self._stop = True
            raise
        if answer_sha256(stored) != answer_sha256(entry):
            # another process stored an answer first (its claim had lapsed): the record wins
            self.counts["answers_discarded"] += 1
            if paid:
                self.usd_spent += float(entry["usd"])
            return stored, False
        return stored, True

    def _unstored(self, req: LLMRequest, route: str, entry: dict, exc: CacheError
                  ) -> CacheError:
        """The error of an answer the cache could not store (a full disk): the answer is
        charged to this run and kept in a file beside the cache when one can be written
        (the next run with the cache stores it), and the one line says which answer, what
        it cost and where it is, or that it is lost."""
        usd = float(entry.get("usd") or 0.0)
        live = self.providers[route].live
        if live:  # paid although the record could not take it
            self.usd += usd
            self.usd_live += usd
            self.usd_spent += usd
        kept = self.cache.keep(req.key(), entry)
        what = (f"the {entry['status']} request {req.key()} ({route}/{req.model}, "
                f"{usd:.6f} USD{' paid' if live and usd else ''})")
        where = (f"{what} is kept in {kept}; the next run with this cache stores it"
                 if kept else f"{what} could not be kept elsewhere either and is lost")
        return CacheError(f"{exc}; {where}")

    async def _fetch(self, req: LLMRequest, route: str) -> dict:
        provider = self.providers[route]
        policy = self.retry.get(route, RetryPolicy())
        deadline = self._deadline(req, route)
        start = time.monotonic()
        attempts = 0
        billed: Counter[str] = Counter()  # class -> attempts the provider may have billed
        error = None  # the class of the last failed attempt
        while True:
            if self._stop or self._draining:
                if billed:  # attempts that may have been paid are recorded, not dropped
                    break
                raise _Skipped
            attempts += 1
            try:
                resp = await self._attempt(provider, req, deadline)
                self.counts["calls"] += attempts
                return self._entry(req, route, resp, None, attempts,
                                   time.monotonic() - start, billed)
            except ProviderError as exc:
                error = exc.error_class
                if exc.billed:
                    billed[exc.error_class] += 1
                # the server's x-should-retry decides first, as in the official SDKs: a 500
                # saying false is tried once, a 4xx saying true is retried
                if (provider.is_retryable(exc) and attempts <= policy.max_retries
                        and (not exc.billed or self._reserve_retry(req, route))):
                    self.retries_by_class[exc.error_class] += 1
                    await self.sleep(policy.delay(attempts - 1, exc.retry_after))
                    continue
                if exc.fatal:
                    self.counts["calls"] += attempts
                    self.counts[f"fatal_{exc.error_class}"] += 1
                    kind = ProviderAuthError if exc.error_class == "auth" else ProviderFatal
                    raise kind(f"provider {route!r} ({provider.kind}), model {req.model!r}: "
                               f"{FATAL_NAMES[exc.error_class]} ({exc.detail or exc}); the run "
                               "stopped and nothing was recorded for this request") from None
                if exc.error_class == "connection" and not billed:
                    self.counts["calls"] += attempts
                    raise ProviderUnavailable(self._unreachable(route, attempts, exc)) from None
                break
        self.counts["calls"] += attempts
        return self._entry(req, route, None, error, attempts, time.monotonic() - start, billed)

    def _unreachable(self, route: str, attempts: int, exc: ProviderError) -> str:
        """The one line of a provider no attempt could connect to, naming the proxy
        variable the route goes through when one is set (its URL without credentials)."""
        found = getattr(self.providers[route], "proxy", lambda: None)()
        if found is None:
            return (f"provider {route!r}: cannot connect after {attempts} attempts ({exc}); "
                    "check its base_url and that it is running")
        var, url = found
        return (f"provider {route!r}: cannot connect through the proxy {var}={url} after "
                f"{attempts} attempts ({exc}); check that the proxy runs and reaches the "
                f"provider, or unset {var}")

    def _reserve_retry(self, req: LLMRequest, route: str) -> bool:
        """Reserve one more worst case before retrying an attempt the provider may have
        billed, so that the charges of every such attempt stay under the caps; False (no
        retry, no halt) when a cap has no room for it."""
        worst = self.worst_case(req)
        if not self.budget.extend(route, worst):
            return False
        self._retry_reserved[req.key()] += worst
        return True

    @staticmethod
    async def _attempt(provider: Provider, req: LLMRequest, deadline: float) -> LLMResponse:
        """One provider call cut off at ``deadline`` seconds of wall clock, body included.

        The SDKs' own timeout bounds each read, so a body that trickles in never trips it;
        this one bounds the whole call, which the claim lease relies on.

        Raises:
            ProviderError: the provider's failure, or ``timeout`` at the deadline (billed:
                the request was in flight, so the provider may have charged for it).
        """
        try:
            async with asyncio.timeout(deadline):
                return await provider.complete(req)
        except TimeoutError:
            raise ProviderError("timeout", f"no complete answer within {deadline:g} s",
                                billed=True) from None

    def _deadline(self, req: LLMRequest, route: str) -> float:
        """Seconds one attempt of ``req`` may take, body included: the request's timeout,
        else its route's, else 60."""
        return req.timeout_s or self.timeouts.get(route) or DEFAULT_TIMEOUT_S

    def _lease(self, req: LLMRequest, route: str) -> float:
        """Seconds a claim is held before another host may take it over.

        Every attempt at its deadline (which it cannot outlive), every backoff at its longest,
        and a minute of slack (on one host a dead owner is noticed at once).
        """
        policy = self.retry.get(route, RetryPolicy())
        return ((policy.max_retries + 1) * self._deadline(req, route)
                + policy.max_retries * policy.max_delay_s + 60)

    def _entry(self, req: LLMRequest, route: str, resp: LLMResponse | None, error: str | None,
               attempts: int, elapsed: float, billed: Counter[str] | None = None) -> dict:
        """The cache entry of a request: its answer (or final failure) and what it cost.

        ``usd`` is the whole charge of the request: the answer's priced cost (its worst case
        when it came without usage or could not be read) plus the worst case of every
        attempt the provider may have billed without answering (``billed``: class -> count,
        recorded as ``billed_attempts``). An answer of a live route also records
        ``reserved_usd`` (the worst case the budget held for the call) and ``stored_by`` (the
        process that paid: ``cache.process_identity``)."""
        payload = req.key_payload()
        if payload.get("json_schema") is not None:  # ~1 kB per entry, the same in every entry
            payload["json_schema"] = {"sha256": hashlib.sha256(
                canonical_json(payload["json_schema"]).encode()).hexdigest()}
        payload.update(req.identity)  # the prompt and schema as sent, besides their labels
        body: dict[str, Any] = {
            "request": payload,
            "status": "failed" if resp is None else "answered",
            "error_class": error,
            "attempts": attempts,
            "elapsed_s": round(elapsed, 6),
            "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        live = self.providers[route].live
        worst = self.worst_case(req) if live else 0.0
        if live:
            # who paid for it and what the budget held for it: `ma spend settle` counts a
            # killed run's answers by its process and bounds its calls in flight by these
            body.update(reserved_usd=worst, stored_by=process_identity())
        usd = 0.0
        if resp is not None:
            usd = self.prices.cost(req.model, resp.usage)
            body.update(
                text=resp.text, refusal=resp.refusal, truncated=resp.truncated,
                served_model=resp.model, usage=resp.usage.to_dict(),
                latency_s=round(resp.latency_s, 6),
            )
            if resp.unparseable:
                # billed, but nothing readable came: an invalid answer of its own class,
                # charged at its worst case (its usage, when reported, is kept as the record)
                body.update(error_class=UNPARSEABLE, unparseable=resp.unparseable)
                usd = worst or usd
            elif worst > 0 and usage_missing(resp):
                # A paid answer that says nothing of its tokens (a gateway, a proxy) would be
                # priced at 0 and never reach the cap: charge the reservation, its worst case.
                body.update(usage_missing=True)
                usd = worst
        if billed:
            body["billed_attempts"] = dict(sorted(billed.items()))
            usd += worst * sum(billed.values())
        if billed or body.get("error_class") == UNPARSEABLE:
            body["worst_usd"] = worst  # what each of those charges was
        if resp is not None or billed:
            body["usd"] = usd
        return body

    def _result(self, req: LLMRequest, entry: dict, parse: Parse | None, cache_hit: bool,
                live: bool) -> LLMResult:
        key = req.key()
        sha = answer_sha256(entry)
        usd = float(entry.get("usd") or 0.0)  # a failure's: attempts the provider may have billed
        self._count_charges(entry, live)
        if entry["status"] != "answered":
            self.counts["failures"] += 1
            self.failures_by_class[entry["error_class"] or "failed"] += 1
            spent = 0.0 if cache_hit or not live else usd
            self.usd += usd
            self.usd_live += usd if live else 0.0
            self.usd_spent += spent
            return LLMResult(key, None, None, None, entry["error_class"] or "failed", Usage(),
                             usd, spent, cache_hit, 0.0, 0 if cache_hit else entry["attempts"],
                             sha)
        usage = Usage.from_dict(entry["usage"])
        text = entry["text"]
        parsed, valid, error = None, True, None
        if entry.get("error_class") == UNPARSEABLE:  # billed, but no answer could be read
            valid, error = False, UNPARSEABLE
        elif entry.get("refusal"):
            valid, error = False, "refusal"
        elif parse is not None:
            try:
                parsed = parse(text)
            except (ValueError, ValidationError) as exc:
                valid = False
                error = "truncated" if entry.get("truncated") else classify_parse_error(exc)
        elif not text:
            valid, error = False, "empty"
        spent = 0.0 if cache_hit or not live else usd
        if entry.get("usage_missing"):
            self.counts["usage_missing"] += 1
            if self.counts["usage_missing"] == 1:
                self.warn(f"provider {req.route or req.provider!r}, model {req.model!r} "
                          "answered without token usage (or with zeros): such answers are "
                          f"charged at their reservation (here {usd:.6f} USD), the worst case; "
                          "llm_usage.usage_missing counts them")
        self.counts["cache_hits" if cache_hit else "answered"] += 1
        self.counts["valid" if valid else "invalid"] += 1
        for name, value in usage.to_dict().items():
            self.tokens[name] += value
        self.usd += usd
        self.usd_live += usd if live else 0.0
        self.usd_spent += spent
        return LLMResult(key, text, parsed, valid, error, usage, usd, spent, cache_hit,
                         float(entry["latency_s"]), 0 if cache_hit else entry["attempts"], sha)

    def _count_charges(self, entry: dict, live: bool) -> None:
        """Count what a request was charged at its worst case, by class: an ``unparseable``
        answer, attempts the provider may have billed without answering (``timeout``); for
        the manifest's ``worst_case_charges``."""
        classes = dict(entry.get("billed_attempts") or {})
        if entry.get("error_class") == UNPARSEABLE and entry["status"] == "answered":
            classes[UNPARSEABLE] = 1
        if not live or not classes:
            return
        for cls, n in classes.items():
            self.charged_by_class[cls] += n
            self.charged_usd_by_class[cls] += n * float(entry.get("worst_usd") or 0.0)

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
        """The run's LLM usage, as manifest.json's ``llm_usage``: requests, calls, answers,
        cache hits, validity, failures and retries by class, budget halts, tokens and USD
        (``usd``: priced, the mock's included; ``usd_live``: priced live answers;
        ``usd_spent``: money actually paid by this process; ``usage_missing``: paid answers
        that came without token usage, or with zeros, each charged at its worst case;
        ``worst_case_charges``: class -> ``{"n", "usd"}`` of the other charges at the worst
        case: ``unparseable`` answers and attempts the provider may have billed without
        answering, e.g. ``timeout``; all of them are in ``usd``, ``usd_live``, ``usd_spent``)."""
        c = self.counts
        answered = c["answered"] + c["cache_hits"]
        run_halts = [h for h in self.budget.halts if h["scope"] == "run"]
        return {
            "requests": answered + c["failures"] + c["budget_halt"] + c["decision_cap"],
            "calls": c["calls"],
            "answered": c["answered"],
            "cache_hits": c["cache_hits"],
            "cached_hits": (c["cache_hits"] / answered) if answered else 0.0,
            "valid": c["valid"],
            "invalid": c["invalid"],
            "failures": c["failures"],
            "failures_by_class": dict(sorted(self.failures_by_class.items())),
            "retries_by_class": dict(sorted(self.retries_by_class.items())),
            "budget_halts": c["budget_halt"],
            "decision_cap_holds": c["decision_cap"],
            "budget_halt_events": list(self.budget.halts),
            "halt_tick": run_halts[0]["tick"] if run_halts else None,
            "reserved_at_halt_usd": run_halts[0]["reserved"] if run_halts else None,
            "spent_at_halt_usd": run_halts[0]["spent"] if run_halts else None,
            "usd_cap": self.budget.usd_cap,
            "usd_over_cap": round(self.budget.over_cap_usd, 10),
            "tokens_in": self.tokens["input"],
            "tokens_cached": self.tokens["cached_input"],
            "tokens_cache_write": self.tokens["cache_write"],
            "tokens_out": self.tokens["output"],
            "tokens_reasoning": self.tokens["reasoning"],
            "usd": round(self.usd, 10),
            "usd_live": round(self.usd_live, 10),
            "usd_spent": round(self.usd_spent, 10),
            "usage_missing": c["usage_missing"],
            "worst_case_charges": {k: {"n": n, "usd": round(self.charged_usd_by_class[k], 10)}
                                   for k, n in sorted(self.charged_by_class.items())},
            "claim_waits": c["claim_waits"],
            "claims_taken_over": c["claims_taken_over"],
            "answers_discarded": c["answers_discarded"],
            "replay": self.replay,
        }

    def _halt(self) -> None:
        # A flag apart from _stop, which each batch resets when it starts: an interrupt that
        # comes before its batch has started must still stop it.
        self._draining = True

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
        """Close every provider's HTTP client, stop the event loop and close the cache."""
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
