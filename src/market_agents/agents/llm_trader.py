"""The bridge between the market and the LLM layer: LLM traders as one pool.

The simulator hands the pool every LLM slot due at a tick; the pool turns each ``MarketView``
into a plain snapshot, builds the requests (persona, memory, cohort channel), sends them
together through :class:`LLMClient`, and turns each answer into orders. An invalid, refused,
failed or budget-halted answer means hold. Which provider and persona a slot gets is drawn
from that slot's own stream, so it never depends on any other slot; a route with several model
ids deals its slots to them in equal shares (:func:`split_models`).
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from market_agents import rng as streams_mod
from market_agents.core import canonical_json
from market_agents.errors import ConfigError, MarketAgentsError, RunFailed
from market_agents.llm import prompting, schema
from market_agents.llm.client import LLMClient, is_valid_entry
from market_agents.llm.library import DecisionLibrary, snapshot_features
from market_agents.llm.pricing import load_prices
from market_agents.llm.types import LLMRequest, LLMResult
from market_agents.market.exchange import order_problem
from market_agents.market.mechanism import trading_fee
from market_agents.market.types import BUY, SELL, Cancel, MarketView, Order
from market_agents.sim.rundir import LLM_ACTIVITY

COHORT_SIZE = 5


@functools.lru_cache(maxsize=1024)
def _schema_json(n_assets: int, band: tuple[float, float]) -> str:
    """``schema.decision_schema(n_assets, band)`` as JSON text, built once per (n_assets, band):
    pydantic builds the model's JSON schema anew on every call (~2 ms, half of a mock LLM
    run's CPU when it was built per request), and the band changes only when the mid crosses
    a whole unit. Each request gets its own dict from the text, so none can change another's."""
    return json.dumps(schema.decision_schema(n_assets, band))


class ReplayMismatch(MarketAgentsError):
    """A decision's stored answer differs from the one the run being reproduced used."""


def view_snapshot(view: MarketView) -> dict[str, Any]:
    """A MarketView as the plain dict ``prompting`` reads (it never sees market types)."""
    return {
        "tick": view.tick,
        "assets": [
            {"asset": a.asset, "public_value": a.public_value, "last_price": a.last_price,
             "mid_price": a.mid_price, "best_bid": a.best_bid, "best_ask": a.best_ask,
             "bid_size": a.bid_size, "ask_size": a.ask_size,
             "recent_prices": list(a.recent_prices), "halted": a.halted, "shares": a.shares}
            for a in view.assets
        ],
        "cash": view.cash,
        "wealth": view.wealth,
        "position_limit": view.position_limit,
        "max_leverage": view.max_leverage,
        "open_orders": [
            {"asset": asset, "side": "buy" if side == BUY else "sell", "price": price,
             "qty": qty}
            for (_, asset, side, price, qty) in view.open_orders
        ],
    }


def pick(shares: list[float], u: float) -> int:
    """The index ``u`` (uniform in [0, 1)) falls on when ``shares`` (non-negative, any
    total) split [0, 1).
    """
    total, acc = sum(shares), 0.0
    for i, s in enumerate(shares):
        acc += s / total
        if u < acc:
            return i
    return len(shares) - 1


class UnrepresentableOrder(ValueError):
    """A decision whose order the exchange cannot take at all (``order_problem``): an invalid
    answer with the exchange's reason as its ``error_class``."""

    def __init__(self, error_class: str, detail: str):
        super().__init__(detail)
        self.error_class = error_class


def to_order(d: schema.Decision) -> Order:
    """The order a buy or sell decision places."""
    return Order(side=BUY if d.action == "buy" else SELL, qty=d.quantity,
                 price=d.limit_price if d.order_type == "limit" else None, asset=d.asset)


def parse_order(text: str, n_assets: int, tick_size: float) -> schema.Decision:
    """Parse an answer into a decision the engine can act on: the decision schema, then the
    exchange's bounds (a limit price of 1e308 once raised OverflowError in the exchange and
    crashed every replay of its cached answer). Validity is decided here once, so the client,
    the cache, the manifest and ``llm_decisions.parquet`` count the same answers.

    Raises:
        ValueError: not a decision (``pydantic.ValidationError``, ``json.JSONDecodeError``), or
            ``UnrepresentableOrder`` (``invalid``, ``qty_out_of_range``,
            ``price_out_of_range``).
    """
    d = schema.parse_decision(text, n_assets=n_assets)
    if d.action != "hold":
        problem = order_problem(to_order(d), n_assets, tick_size)
        if problem is not None:
            raise UnrepresentableOrder(problem, f"the exchange cannot take this order: {problem}")
    return d


def split_models(slots: list[int], models: list[str], streams: streams_mod.Streams,
                 route: str) -> dict[int, str]:
    """Equal shares of a route's slots per model (protocol §5.2 note ii, ``mix_25``): a
    permutation from the slot stream deals the slots to the models in turn, so each model gets
    floor(n/k) or ceil(n/k) slots, never a coin flip per slot. Which models get the remainder
    rotates with the seed (seed mod k first), so over k consecutive seeds every model gets the
    same number of slots: 25 slots, two models, seeds 101-106 give 13/12, 12/13, ... and
    2,025 + 2,025 decisions in all.

    Args:
        slots: the route's LLM slots (any order; sorted here).
        models: the route's model ids, in the config's order.
        streams: the run's streams (its seed rotates the remainder).
        route: the route name (names the permutation's stream).

    Returns: slot -> model id.
    """
    k = len(models)
    order = streams.generator(streams_mod.SLOTS, "llm_models", route).permutation(sorted(slots))
    first = streams.seed % k
    # Slot i of the permutation goes to model (first + i) mod k: the first n mod k models in
    # that order are the ones with one slot more.
    return {int(s): models[(first + i) % k] for i, s in enumerate(order)}


def prompt_rules(config) -> dict[str, Any]:
    """The run's rules as the system prompt states them (``prompting.system_text``): session
    length and decision interval (ticks), tick size (currency units), order lifetime (ticks),
    the number of assets and, only when there is one (so that the prompts of a market without
    fees are unchanged), the fee each side pays as a fraction of a trade's value."""
    rules = {"ticks": config.simulation.ticks,
             "decision_interval": config.simulation.decision_interval,
             "tick_size": config.exchange.tick_size, "order_ttl": config.exchange.order_ttl,
             "n_assets": config.fundamentals.n_assets}
    fee = trading_fee(config)
    return {**rules, "fee_rate": fee} if fee else rules


# A fixed market state the prompt is rendered on for its identity: every part of the messages
# (the rules, each persona, the snapshot's fields, a memory line, a cohort message, the frame).
_PROBE = {"tick": 0, "cash": 1000.0, "wealth": 2000.0,
          "assets": [{"asset": 0, "public_value": 100.0, "last_price": 100.0, "mid_price": 100.0}]}
_PROBE_MEMORY = [{"tick": 0, "action": "buy", "qty": 1, "price": 100.0, "filled": 1}]
_PROBE_CHANNEL = [{"peer": 0, "tick": 0, "message": "probe"}]


def prompt_identity(config) -> dict[str, str]:
    """What identifies the prompt and the answer schema a run's LLM traders get, beyond their
    labels (``prompt_version``): ``prompt_sha256``, the SHA-256 of the messages rendered on a
    fixed probe state for every persona of the run's prompt set, with its rules, memory and
    channel as configured (any change to the text, the snapshot's fields or the frame changes
    it, whatever the label says); ``schema_sha256``, of the answer schema for the run's assets
    and the limit-price band (canonical JSON).

    Args:
        config: the run's validated config.
    """
    llm = config.population.llm
    rules = prompt_rules(config)
    probe = {**_PROBE, "assets": [{**_PROBE["assets"][0], "asset": i}
                                  for i in range(rules["n_assets"])]}
    rendered = [[m.role, m.content]
                for persona in prompting.personas(llm.prompt_set, llm.prompt_sets)
                for m in prompting.build_messages(
                    probe, rules, llm.prompt_set, persona,
                    _PROBE_MEMORY if llm.memory else None,
                    _PROBE_CHANNEL if llm.channel else None, llm.prompt_version,
                    llm.prompt_sets)]
    answer = {"schema": schema.decision_schema(rules["n_assets"]),
              "price_band": list(schema.PRICE_BAND)}
    return {"prompt_sha256": hashlib.sha256(canonical_json(rendered).encode()).hexdigest(),
            "schema_sha256": hashlib.sha256(canonical_json(answer).encode()).hexdigest()}


class LLMTraderPool:
    """The LLM traders of one run: assigns each LLM slot a route, model and prompt, asks the
    :class:`LLMClient` for every decision due at a tick in one batch (or replays the frozen
    library), parses answers into orders, and records one row per decision opportunity.
    """

    def __init__(self, config, streams: streams_mod.Streams, slots: list[int],
                 cache_path: str | Path | None, client: LLMClient | None = None,
                 expected: dict[tuple[int, int], str | None] | None = None,
                 expected_from: str = ""):
        """``expected``: (tick, slot) -> answer_sha256 of a run this one must reproduce
        (read from its llm_decisions.parquet, named by ``expected_from``); a decision whose
        stored answer differs raises :class:`ReplayMismatch` before anything else is paid."""
        llm = config.population.llm
        self.llm = llm
        self.n_assets = config.fundamentals.n_assets
        self.tick_size = config.exchange.tick_size
        self.expected = expected
        self.expected_from = expected_from
        self.planned_decisions: int | None = None  # set by the simulation (failure-rate stop)
        self.cache_path = cache_path
        self.slots = sorted(int(s) for s in slots)
        self.library: DecisionLibrary | None = None
        if llm.frozen_library:
            if self.n_assets != 1:
                raise ConfigError("population.llm.frozen_library: the library replays "
                                  "single-asset decisions; fundamentals.n_assets must be 1")
            self.library = DecisionLibrary.load(llm.frozen_library)
            self.nn: list[float] = []
        self.client = None if self.library else (client or LLMClient.from_settings(llm,
                                                                                   cache_path))
        self.rules = prompt_rules(config)
        self.identity = prompt_identity(config)
        # One parse for every answer of the run: the client, the cache and this pool agree on
        # which answers are valid (the engine can act on them).
        self.parse = functools.partial(parse_order, n_assets=self.n_assets,
                                       tick_size=self.tick_size)
        self.mock_seed = int(streams.generator(streams_mod.MOCK_LLM).integers(2**31))
        routes = llm.routes()
        personas = prompting.personas(llm.prompt_set, llm.prompt_sets)
        self.assignment: dict[int, dict[str, str]] = {}
        for slot in self.slots:
            g = streams.generator(streams_mod.SLOTS, "llm_assign", slot)
            u_route, u_model, u_persona = g.random(3)  # always three draws: settings stay apart
            route = routes[pick([llm.provider_mix[r] for r in routes], u_route)]
            models = llm.model_ids(route)
            self.assignment[slot] = {
                "route": route,
                "kind": llm.kind(route),
                "model": models[int(u_model * len(models))],
                "persona": personas[int(u_persona * len(personas))],
            }
        for route in routes:
            if len(llm.model_ids(route)) > 1:
                on_route = [s for s in self.slots if self.assignment[s]["route"] == route]
                for slot, model in split_models(on_route, llm.model_ids(route), streams,
                                                route).items():
                    self.assignment[slot]["model"] = model
        self.cohort: dict[int, list[int]] = {}
        if llm.channel:
            order = streams.generator(streams_mod.SLOTS, "llm_cohorts").permutation(self.slots)
            for i in range(0, len(order), COHORT_SIZE):
                members = sorted(int(s) for s in order[i : i + COHORT_SIZE])
                for s in members:
                    self.cohort[s] = [p for p in members if p != s]
        self.history: dict[int, list[dict[str, Any]]] = {s: [] for s in self.slots}
        self.messages: dict[int, tuple[int, str]] = {}  # slot -> (tick, last message)
        self.rows: list[dict[str, Any]] = []
        # Mechanism activity: messages posted to and shown from the cohort channel, and past
        # decisions shown as memory (manifest; outcomes' activity table).
        self.activity = dict.fromkeys(LLM_ACTIVITY, 0)
        self.keys: list[str] = []  # the request key of each row (the cache's view of validity)

    # --- per tick -------------------------------------------------------------------------

    def request(self, tick: int, view: MarketView) -> LLMRequest:
        """The LLM request of ``view.slot`` at ``tick``: its prompt (with memory and channel
        sections when on), schema, model and caps.
        """
        slot = view.slot
        a = self.assignment[slot]
        memory = None
        if self.llm.memory > 0:
            self._settle_fills(slot, view)
            memory = [{k: h[k] for k in ("tick", "action", "qty", "price", "filled")}
                      for h in self.history[slot][-self.llm.memory:]]
            self.activity["llm_memory_lines"] += len(memory)
        channel = None
        if self.llm.channel:
            channel = [{"peer": p, "tick": self.messages[p][0], "message": self.messages[p][1]}
                       for p in self.cohort.get(slot, []) if p in self.messages]
            self.activity["llm_channel_read"] += len(channel)
        messages = prompting.build_messages(view_snapshot(view), self.rules, self.llm.prompt_set,
                                            a["persona"], memory, channel,
                                            self.llm.prompt_version, self.llm.prompt_sets)
        settings = self.llm.settings(a["route"])
        band = schema.price_band([x.mid_price for x in view.assets])
        return LLMRequest(
            provider=a["kind"],
            model=a["model"],
            messages=messages,
            json_schema=json.loads(_schema_json(self.n_assets, band)),
            structured_output=self.llm.structured_output(a["route"]),
            schema_name=schema.SCHEMA_NAME,
            prompt_id=prompting.prompt_id(self.llm.prompt_set, a["persona"],
                                          self.llm.prompt_version),
            prompt_version=self.llm.prompt_version,
            max_output_tokens=self.llm.max_output_tokens,
            temperature=self.llm.temperature,
            reasoning_effort=self.llm.reasoning_effort,
            agent=f"slot{slot}",
            extra={"mock_seed": self.mock_seed} if a["kind"] == "mock" else {},
            route=a["route"],
            timeout_s=settings.timeout_s,
            identity=self.identity,
        )

    def decide(self, tick: int, views: dict[int, MarketView]) -> dict[int, list[Order | Cancel]]:
        """The orders of every LLM slot deciding at ``tick``, from one batch of requests.

        Args:
            tick: the market tick.
            views: slot -> what it sees.

        Returns:
            Slot -> its orders and cancels (none for an invalid answer, a failure or a hold).

        Raises:
            ReplayMismatch: an answer differs from the run this one must reproduce.
            RunFailed: failures passed ``max_failure_rate``.
        """
        slots = sorted(views)
        if self.library is not None:
            return self._replay(tick, slots, views)
        requests = [self.request(tick, views[s]) for s in slots]
        results = self.client.complete_many(requests, self.parse, where=f"tick {tick}",
                                            tick=tick)
        if self.expected is not None:
            for slot, req, res in zip(slots, requests, results, strict=True):
                self._check_expected(tick, slot, req, res)
        out: dict[int, list[Order | Cancel]] = {}
        for slot, req, res in zip(slots, requests, results, strict=True):
            out[slot] = self._apply(tick, slot, views[slot], req, res)
            self.keys.append(res.key)
        self._check_failures(tick)
        for slot, res in zip(slots, results, strict=True):
            d = res.parsed
            if res.valid and d is not None and d.message.strip():
                self.messages[slot] = (tick, d.message.strip())
                self.activity["llm_channel_sent"] += self.llm.channel
        return out

    def _apply(self, tick: int, slot: int, view: MarketView, req: LLMRequest,
               res: LLMResult) -> list[Order | Cancel]:
        d: schema.Decision | None = res.parsed
        valid, error = res.valid, res.error_class
        orders: list[Order | Cancel] = []
        action, qty, price = "hold", 0, None
        if valid and d is not None and d.action != "hold":
            order = to_order(d)
            action, qty, price = d.action, order.qty, order.price
            orders.append(order)
        shares = view.assets[d.asset if valid and d is not None else 0].shares
        self.history[slot].append({"tick": tick, "action": action, "qty": qty, "price": price,
                                   "asset": d.asset if valid and d else 0, "shares": shares,
                                   "filled": 0})
        u = res.usage
        self.rows.append({
            "tick": tick, "slot": slot, "provider": req.route, "model": req.model,
            "prompt_id": req.prompt_id, "prompt_version": req.prompt_version, "valid": valid,
            "action": action, "qty": qty, "price": price, "tokens_in": u.input,
            "tokens_cached": u.cached_input, "tokens_out": u.output,
            "tokens_reasoning": u.reasoning, "usd": res.usd, "latency_s": res.latency_s,
            "error_class": error, "error_detail": self._why_invalid(res),
            "answer_sha256": res.answer_sha256,
        })
        return orders

    def _check_expected(self, tick: int, slot: int, req: LLMRequest, res: LLMResult) -> None:
        if (tick, slot) not in self.expected:
            raise ReplayMismatch(
                f"{self.expected_from}: this run made a decision for slot {slot} at tick {tick} "
                "that the run it reproduces did not make; the cache no longer holds that run's "
                "record. Move the run directory away to keep a new run")
        want = self.expected[(tick, slot)]
        if want is not None and want != res.answer_sha256:
            got = (res.answer_sha256 or "none (no answer)")[:16]
            raise ReplayMismatch(
                f"{self.expected_from}: the stored answer for slot {slot} at tick {tick} "
                f"(request {req.key()}) differs from the one that run used (answer_sha256 "
                f"{want[:16]}… there, {got}… in the cache {self.cache_path}); the cache no "
                "longer holds that run's record. Restore the cache, or move the run directory "
                "away to keep a new run")

    def _check_failures(self, tick: int) -> None:
        """Stop once the failures alone put the run's failure rate over max_failure_rate
        (failures / planned LLM decisions): the outcome is then certain, so the run stops
        early, at a point that depends only on the record."""
        failures = self.client.counts["failures"]
        planned = self.planned_decisions
        limit = self.llm.max_failure_rate
        if not failures or planned is None or failures <= limit * planned:
            return
        by_class = ", ".join(f"{k} {v}" for k, v in self.client.failures_by_class.items())
        where = f" in {self.cache_path}" if self.cache_path else ""
        record = {"status": "failed", "reason": "max_failure_rate", "tick": tick,
                  "failures": failures, "planned_decisions": planned,
                  "max_failure_rate": limit, "llm_usage": self.client.usage_summary()}
        raise RunFailed(
            f"run stopped at tick {tick} and marked failed: {failures} of {planned} planned LLM "
            f"decisions failed after their retries ({failures / planned:.1%} > "
            f"population.llm.max_failure_rate {limit}; {by_class}). The failures are recorded"
            f"{where}; `ma cache retry-failures CACHE` removes them so a re-run fetches them "
            "again", record)

    def _why_invalid(self, res: LLMResult) -> str | None:
        """Why an answer that arrived is invalid, in one line (None: valid or no answer)."""
        if res.valid is not False or res.text is None:
            return None
        try:
            self.parse(res.text)
        except UnrepresentableOrder as exc:
            return str(exc)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            return schema.invalid_reason(res.text, exc)
        return res.error_class  # parsed, yet invalid: a refusal

    def _replay(self, tick: int, slots: list[int],
                views: dict[int, MarketView]) -> dict[int, list[Order | Cancel]]:
        """Frozen-library mode: each slot does what the recorded model did in the nearest
        recorded state. No provider, no cache, no cost."""
        lib = self.library
        snaps = [prompting.canonical_snapshot(view_snapshot(views[s])) for s in slots]
        idx, dist = lib.nearest(np.array([snapshot_features(sn) for sn in snaps]))
        out: dict[int, list[Order | Cancel]] = {}
        for slot, sn, i, d in zip(slots, snaps, idx, dist, strict=True):
            rec = lib.decision(int(i), sn["assets"][0]["mid_price"])
            self.nn.append(float(d))
            orders: list[Order | Cancel] = []
            if rec["action"] != "hold":
                orders.append(Order(side=BUY if rec["action"] == "buy" else SELL,
                                    qty=rec["quantity"], price=rec["limit_price"], asset=0))
            out[slot] = orders
            self.rows.append({
                "tick": tick, "slot": slot, "provider": "library", "model": lib.meta["model"],
                "prompt_id": f"library-{lib.meta['sha256'][:12]}",
                "prompt_version": ",".join(lib.meta.get("prompt_versions", [])),
                "valid": rec["valid"], "action": rec["action"], "qty": rec["quantity"],
                "price": rec["limit_price"], "tokens_in": 0, "tokens_cached": 0,
                "tokens_out": 0, "tokens_reasoning": 0, "usd": 0.0, "latency_s": 0.0,
                "error_class": rec["error_class"], "error_detail": None, "answer_sha256": None,
            })
        return out

    def _library_manifest(self) -> dict[str, Any]:
        lib = self.library
        nn = np.array(self.nn) if self.nn else np.array([np.nan])
        median = float(np.median(nn))
        return {
            "path": str(self.llm.frozen_library), "sha256": lib.meta["sha256"],
            "n_entries": len(lib), "model": lib.meta["model"],
            "prompt_versions": lib.meta.get("prompt_versions", []),
            "loo_nn_p90": lib.meta["loo_nn_p90"], "nn_median": median,
            "nn_p90": float(np.quantile(nn, 0.9)),
            "out_of_support": bool(median > lib.meta["loo_nn_p90"]),
            # §5.4 asks for the distribution: every decision's standardized distance, in the
            # order of llm_decisions.parquet, and the library's own (N = 100) percentiles
            "nn_distances": [round(float(d), 6) for d in self.nn],
            "loo_nn_percentiles": lib.meta["loo_nn_percentiles"],
        }

    def _settle_fills(self, slot: int, view: MarketView) -> None:
        """Fills of each past decision, read as the position change until the next one (the
        view carries positions for every trader; fills are not needed)."""
        hist = self.history[slot]
        for i, h in enumerate(hist):
            after = hist[i + 1]["shares"] if i + 1 < len(hist) else view.assets[h["asset"]].shares
            h["filled"] = after - h["shares"] if h["action"] != "hold" else 0

    # --- after the run --------------------------------------------------------------------

    def records(self) -> list[dict[str, Any]]:
        """The rows of llm_decisions.parquet, one per decision opportunity."""
        return list(self.rows)

    def manifest(self) -> dict[str, Any]:
        """The LLM fields of manifest.json: usage, prompt version, structured output, price
        assumptions, slots (and the library's distances in a replay).
        """
        if self.library is not None:
            valid = sum(1 for r in self.rows if r["valid"])
            usage = LLMClient({}, load_prices()).usage_summary() | {
                "requests": len(self.rows), "valid": valid, "invalid": len(self.rows) - valid}
            return {"prompt_version": ",".join(self.library.meta.get("prompt_versions", [])),
                    "price_assumptions": {}, "llm_usage": usage,
                    "library": self._library_manifest()}
        models = sorted({a["model"] for a in self.assignment.values()})
        cache = self.client.cache
        return {
            # valid answers as the response cache records them (None: no cache), over the
            # decisions that used an answer (a budget-halted or capped decision did not, though
            # a run sharing the cache may have stored one for its key): equal to
            # llm_usage.valid and to llm_decisions.parquet (checked when the run is written)
            "cache_valid": None if cache is None else sum(
                is_valid_entry(e) for row, key in zip(self.rows, self.keys, strict=True)
                if row["valid"] is not None and (e := cache.get(key)) is not None),
            "prompt_version": self.llm.prompt_version,
            **self.identity,
            "answers_recorded": self._answer_dates(),
            "structured_output": {r: self.llm.structured_output(r) for r in self.llm.routes()},
            "price_assumptions": self.client.prices.assumptions(models),
            "llm_usage": self.client.usage_summary(),
            "llm_slots": [{"slot": s, "provider": a["route"], "model": a["model"],
                           "prompt_id": prompting.prompt_id(self.llm.prompt_set, a["persona"],
                                                            self.llm.prompt_version),
                           "structured_output": self.llm.structured_output(a["route"])}
                          for s, a in sorted(self.assignment.items())],
        }

    def mechanisms(self) -> dict[str, bool]:
        """The LLM traders' mechanisms this run switches on (memory, the cohort channel, a
        decision cap) and whether each acted: memory lines shown, peer messages read,
        decisions held by the cap (manifest ``mechanisms``)."""
        held = sum(1 for r in self.rows if r.get("error_class") == "decision_cap")
        switched = {"memory": (self.llm.memory > 0, self.activity["llm_memory_lines"]),
                    "channel": (bool(self.llm.channel), self.activity["llm_channel_read"]),
                    "decision_cap": (self.llm.decision_cap is not None, held)}
        return {name: count > 0 for name, (on, count) in switched.items() if on}

    def _answer_dates(self) -> dict[str, str] | None:
        """The first and last UTC date (YYYY-MM-DD) on which the answers this run used were
        recorded, from their cache entries (None without a cache, or when no answer was
        used). Read from the record, not the clock, so a replay writes the same manifest; the
        model cards' "dates used" come from here."""
        cache = self.client.cache if self.client is not None else None
        if cache is None:
            return None
        dates = sorted({str(e["recorded_at"])[:10] for row, key in zip(self.rows, self.keys,
                                                                           strict=True)
                        if row["valid"] is not None and (e := cache.get(key)) is not None
                        and e.get("recorded_at")})
        return {"first": dates[0], "last": dates[-1]} if dates else None

    def close(self) -> None:
        """Close the LLM client (and its cache)."""
        if self.client is not None:
            self.client.close()
