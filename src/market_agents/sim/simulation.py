"""One run of the market: population, schedule and the tick loop, returning tables.

Each tick: expire orders → market makers quote → every trader due at this tick decides on the
same snapshot (LLM traders' requests go out together) → orders are applied in slot order →
auction / rules → the tick is recorded. Slots, schedule and values come from named streams, so
turning one slot into an LLM trader changes that slot's decisions and nothing else.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from market_agents import rng as streams_mod
from market_agents.agents.base import Opening, RunContext, Trader
from market_agents.agents.traders.llm import LLMTrader
from market_agents.agents.traders.market_maker import MarketMaker
from market_agents.config import Config, draw_order
from market_agents.market.exchange import Exchange, refusal_reasons
from market_agents.market.fundamentals import draw_path
from market_agents.market.mechanism import trading_fee
from market_agents.market.types import AssetView, MarketView
from market_agents.plugins import MECHANISMS, TRADERS
from market_agents.sim.rundir import LLM_ACTIVITY, SCHEMAS, classical_llm_fields


@dataclass(frozen=True)
class Population:
    """Who sits in each trader slot: its trader type, which slots are LLM traders, and
    each slot's activation phase (shape ``(n_traders,)``, in 0..decision_interval-1).
    """

    types: tuple[str, ...]  # trader type of every slot (what it is when it is not an LLM)
    llm_slots: tuple[int, ...]
    phases: np.ndarray  # activation phase of every slot, in 0..decision_interval-1


def assign_population(config: Config, streams: streams_mod.Streams) -> Population:
    """Draw the population of a run from the slot and activation streams.

    The first ``n_market_makers`` slots are market makers; the others get the types of
    ``population.mix`` in its shares, then ``population.slot_types`` pins given slots. A slot's
    type does not depend on how many slots are LLM traders, so turning a slot into an LLM
    trader changes that slot's decisions and nothing else.

    Args:
        config: the run's config (``population``, ``simulation.decision_interval``).
        streams: the run's named random streams.

    Returns:
        The :class:`Population`.
    """
    pop = config.population
    n, n_mm = pop.n_traders, pop.n_market_makers
    eligible = np.arange(n_mm, n)
    # Largest-remainder counts, then a permutation from the slot stream: a slot's type does not
    # depend on how many slots are LLM traders. The types come in their draw order (the
    # built-ins' order of every run so far, then plug-ins by name).
    names = draw_order(pop.mix)
    shares = np.array([pop.mix[k] for k in names]) * len(eligible)
    counts = np.floor(shares).astype(int)
    for i in np.argsort(-(shares - counts), kind="stable")[: len(eligible) - counts.sum()]:
        counts[i] += 1
    kinds = np.repeat(np.array(names), counts)
    kinds = streams.generator(streams_mod.SLOTS, "types").permutation(kinds)
    types = [MarketMaker.name] * n_mm + kinds.tolist()
    for slot, kind in pop.slot_types.items():
        types[slot] = kind
    order = streams.generator(streams_mod.SLOTS, "llm").permutation(eligible)
    llm = tuple(sorted(int(s) for s in order[: pop.n_llm]))
    interval = config.simulation.decision_interval
    phases = streams.generator(streams_mod.ACTIVATION).integers(0, interval, size=n)
    return Population(tuple(types), llm, phases)


def activation_ticks(config: Config, phase: int) -> range:
    """The ticks at which a slot with ``phase`` decides: every ``decision_interval`` ticks
    from ``burn_in + phase`` to the end of the run.
    """
    sim = config.simulation
    return range(sim.burn_in + int(phase), sim.ticks, sim.decision_interval)


def trader_types(population: Population) -> dict[str, type[Trader]]:
    """The registered class of each type in ``population``."""
    return {kind: TRADERS.get(kind, "population") for kind in sorted(set(population.types))}


def schedule(config: Config, population: Population) -> dict[int, list[int]]:
    """Tick -> the slots that decide at it, in ascending slot order: every slot but those of a
    type that decides every tick (the market makers, who quote; LLM slots are never makers) at
    its :func:`activation_ticks`.
    """
    sim = config.simulation
    every_tick = {kind for kind, cls in trader_types(population).items() if cls.every_tick}
    slots = np.array([s for s, kind in enumerate(population.types) if kind not in every_tick],
                     dtype=np.int64)
    first = sim.burn_in + population.phases[slots].astype(np.int64)
    counts = np.maximum(0, -((first - sim.ticks) // sim.decision_interval))  # len(range(...))
    which = np.repeat(slots, counts)
    k = np.arange(len(which)) - np.repeat(np.cumsum(counts) - counts, counts)
    ticks = np.repeat(first, counts) + k * sim.decision_interval
    order = np.lexsort((which, ticks))  # by tick, then by slot
    ticks, which = ticks[order], which[order]
    starts = np.flatnonzero(np.diff(ticks, prepend=-1)).tolist() + [len(ticks)]
    at, slot_list = ticks.tolist(), which.tolist()
    return {at[i]: slot_list[i:j] for i, j in pairwise(starts)}


def opening_account(config: Config, kind: str, is_llm: bool) -> Opening:
    """The cash (currency units), shares and leverage a slot of type ``kind`` opens with, as
    its type says (``Trader.opening``; ``is_llm``: an LLM trader sits in it)."""
    return TRADERS.get(kind, "population").opening(config, is_llm)


def build_traders(config: Config, streams: streams_mod.Streams, population: Population,
                  ex: Exchange) -> dict[int, Trader]:
    """One account per slot, and a trader in every slot that is not an LLM slot and acts in
    the run: the market makers and each slot with at least one activation tick.

    A trader draws its parameters from its private stream when it is built and only ever
    uses the stream again in its own decisions, so a slot that never decides (most slots when
    ``decision_interval`` exceeds the run, as in the large populations of protocol §5.4)
    needs neither: it is left out, and every other slot's draws are the same.

    Returns:
        Slot -> trader, in slot order.
    """
    sim = config.simulation
    llm = set(population.llm_slots)
    decides = (sim.burn_in + population.phases < sim.ticks).tolist()  # activation_ticks non-empty
    classes = trader_types(population)
    # Every slot of a kind opens the same account; a row is made as it is opened, so that no
    # list of 10,000 rows stays alive (long-lived objects are what the cyclic GC scans).
    terms = {(kind, is_llm): (LLMTrader.name if is_llm else kind, is_llm,
                              *cls.opening(config, is_llm))
             for kind, cls in classes.items() for is_llm in (False, True)}
    types = population.types
    ex.open_accounts((slot, *terms[kind, slot in llm]) for slot, kind in enumerate(types))
    acting = [slot for slot, kind in enumerate(types)
              if slot not in llm and (classes[kind].every_tick or decides[slot])]
    ex.seal()
    run = RunContext(config, streams)  # the draws a type shares are made once, if it acts
    return {slot: classes[types[slot]].build(slot, rng, run)
            for slot, rng in zip(acting, streams.agents(acting), strict=True)}


class Run:
    """State of one simulation; :meth:`execute` returns the run's tables."""

    def __init__(self, config: Config, seed: int, cache_path: str | Path | None = None,
                 progress: bool | None = None,
                 expected: dict[tuple[int, int], str | None] | None = None,
                 expected_from: str = ""):
        self.config = config
        self.seed = seed
        self.streams = streams_mod.Streams(seed)
        sim = config.simulation
        self.path = draw_path(config.fundamentals, config.shocks, sim.ticks,
                              self.streams.generator(streams_mod.FUNDAMENTALS))
        n_assets = config.fundamentals.n_assets
        self.ex = Exchange(config.exchange, n_assets, list(self.path.public[:, 0]))
        self.ex.install(m(config, self.ex) for m in MECHANISMS if m.installed(config))
        self.population = assign_population(config, self.streams)
        self.traders = build_traders(config, self.streams, self.population, self.ex)
        self.llm_slots = frozenset(self.population.llm_slots)
        self.pool = None
        if self.population.llm_slots:
            # the LLM layer (asyncio, the providers, the cache) loads only for LLM slots
            from market_agents.agents.llm_trader import LLMTraderPool

            self.pool = LLMTraderPool(config, self.streams, list(self.population.llm_slots),
                                      cache_path, client=_run_client(config, cache_path),
                                      expected=expected, expected_from=expected_from)
        self.schedule = schedule(config, self.population)
        if self.pool is not None:
            self.pool.planned_decisions = sum(
                len(activation_ticks(config, self.population.phases[s]))
                for s in self.population.llm_slots)
        self.makers = [s for s, t in self.traders.items() if t.every_tick]
        self.decisions = dict.fromkeys(range(config.population.n_traders), 0)
        # Plain lists: the loop reads one value per tick, and numpy scalar indexing is slow.
        self.public: list[list[float]] = self.path.public.tolist()
        self.value: list[list[float]] = self.path.value.tolist()
        self.mids: list[list[float]] = [[row[0]] for row in self.public]
        self.progress = sys.stderr.isatty() if progress is None else progress
        self.tick_size = config.exchange.tick_size
        self.position_limit = config.exchange.position_limit
        self.fee_rate = trading_fee(config)

    def snapshot(self, halted: bool) -> list[tuple]:
        """The public part of every asset's view, computed once per decision phase."""
        ex, t = self.ex, self.ex.tick
        h = self.config.simulation.history
        out = []
        for a, book in enumerate(ex.books):
            bid, ask = book.best(1), book.best(-1)
            out.append((
                a, round(self.public[a][t], 4), ex.to_price(ex.last[a]), ex.mid[a],
                None if bid is None else ex.to_price(bid),
                None if ask is None else ex.to_price(ask),
                book.size_at(1, bid), book.size_at(-1, ask), tuple(self.mids[a][-h:]), halted,
            ))
        return out

    def view(self, slot: int, public: list[tuple]) -> MarketView:
        """What the trader in ``slot`` sees this tick: its account and the public market
        (V^pub, never V).
        """
        # One view per maker per tick and per trader decision (the largest cost after order
        # handling): fields in MarketView's order, settings read once in __init__, and the
        # one-asset market without a loop.
        ex = self.ex
        acct = ex.accounts[slot]
        tick = self.tick_size
        shares = acct.shares
        orders = acct.open_orders
        if orders:
            price_of, order_asset = ex.price_of, acct.order_asset
            open_orders = tuple([(o.id, order_asset[o.id], o.side, price_of[o.price], o.qty)
                                 for o in orders.values()])
        else:
            open_orders = ()
        if len(public) == 1:
            assets: tuple[AssetView, ...] = (AssetView(*public[0], shares[0]),)
            equity = acct.cash + (0.0 + shares[0] * (ex.mid[0] / tick))  # ex.equity(acct)
        else:
            assets = tuple([AssetView(*p, shares[i]) for i, p in enumerate(public)])
            equity = ex.equity(acct)
        return MarketView(ex.tick, slot, assets, acct.cash * tick, equity * tick,
                          self.position_limit, acct.leverage, open_orders, self.fee_rate)

    def execute(self) -> dict[str, Any]:
        """Run the tick loop to the end and build the run's tables (see :func:`simulate`)."""
        sim, ex = self.config.simulation, self.ex
        n_assets = self.config.fundamentals.n_assets
        rows: list[tuple] = []  # one per tick and asset, in TICKS_SCHEMA's column order
        ticks = range(sim.ticks)
        if self.progress:
            from tqdm import tqdm  # why: only on a terminal; a batch of runs never loads it

            ticks = tqdm(ticks, desc=f"seed {self.seed}", unit="tick", leave=False)
        for t in ticks:
            ex.begin_tick(t)
            halted = ex.halted
            # Market makers quote on one snapshot, then every trader due decides on another.
            public = self.snapshot(halted)
            for slot in self.makers:
                for action in self.traders[slot].decide(self.view(slot, public)):
                    ex.submit(slot, action)
            due = self.schedule.get(t, [])
            if due:
                # The traders due see the book the makers have just quoted, and its mid: on a
                # release tick the mid of the tick before is the price before the news, and
                # orders priced on it traded against the makers' new quotes (a 10 % release at
                # V^pub ≈ 100 left the mid 12 % above V^pub for 60 ticks; issue 23).
                ex.update_mids()
            public = self.snapshot(halted) if due else []  # most ticks of a sparse schedule
            views = {slot: self.view(slot, public) for slot in due}
            llm_due = {s: v for s, v in views.items() if s in self.llm_slots}
            llm_actions = self.pool.decide(t, llm_due) if llm_due else {}
            for slot in due:
                self.decisions[slot] += 1
                trader = self.traders.get(slot)
                actions = trader.decide(views[slot]) if trader else llm_actions.get(slot, [])
                for action in actions:
                    ex.submit(slot, action)
            ex.end_tick()
            for a in range(n_assets):
                self.mids[a].append(ex.mid[a])
                bid, ask = ex.books[a].best(1), ex.books[a].best(-1)
                rows.append((
                    t, a, ex.to_price(ex.last[a]), round(ex.mid[a], 6),
                    None if bid is None else ex.to_price(bid),
                    None if ask is None else ex.to_price(ask),
                    None if bid is None or ask is None else ex.to_price(ask - bid),
                    self.value[a][t], self.public[a][t], ex.tick_volume[a], ex.tick_trades[a],
                    halted,
                ))
        return self._tables(rows)

    def _tables(self, rows: list[tuple]) -> dict[str, Any]:
        ex = self.ex
        n_assets = self.config.fundamentals.n_assets
        tick = self.config.exchange.tick_size
        # A column at a time, each rounding done once per distinct value: one row per slot
        # (10,000 in the large populations of §5.4), most of them still at their opening.
        slots = sorted(ex.accounts)
        accts = [ex.accounts[s] for s in slots]
        phases = self.population.phases.tolist()
        cash = {c: round(c * tick, 2) for c in {a.cash for a in accts}}
        if n_assets == 1:  # ex.equity(acct) without a call: the same operations in order
            mid = ex.mid[0] / tick
            worth = {(c, s): round((c + (0.0 + s * mid)) * tick, 4)
                     for c, s in {(a.cash, a.shares[0]) for a in accts}}
            wealth = [worth[a.cash, a.shares[0]] for a in accts]
        else:
            wealth = [round(ex.equity(a) * tick, 4) for a in accts]
        agents = {
            "slot": slots,
            "type": [a.kind for a in accts],
            "is_llm": [a.is_llm for a in accts],
            "phase": [phases[s] for s in slots],
            "cash": [cash[a.cash] for a in accts],
            "shares": [a.shares[0] for a in accts],
            "shares_1": [a.shares[1] for a in accts] if n_assets > 1 else [None] * len(accts),
            "wealth": wealth,
            "n_decisions": [self.decisions[s] for s in slots],
        }
        tables = {
            "ticks": frame(rows, SCHEMAS["ticks"]),
            "trades": frame(ex.trade_rows, SCHEMAS["trades"]),
            "orders": frame(ex.order_rows, SCHEMAS["orders"]),
            "agents": pl.DataFrame(agents, schema=SCHEMAS["agents"]),
        }
        llm_rows = self.pool.records() if self.pool else []
        tables["llm_decisions"] = pl.DataFrame(
            {k: [r.get(k) for r in llm_rows] for k in SCHEMAS["llm_decisions"]},
            schema=SCHEMAS["llm_decisions"])
        on = [m for m in ex.mechanisms if m.switched_on()]
        summary = {
            "final_conservation_ok": ex.conservation_ok(),
            "halts": ex.halts,
            "n_rejects": sum(1 for row in ex.order_rows if row[8] == "rejected"),
            "n_llm_agents": len(self.population.llm_slots),
            "mechanism_events": {m.name: m.events() for m in on if m.events()},
        }
        # Mechanism activity as data (outcomes, `ma summary` and the paper read it here), in
        # lists because their order is the outcome columns' (a manifest's keys are sorted):
        # the reasons an order may be refused, each installed mechanism's counts and the LLM
        # traders', and the mechanisms switched on and those among them that never acted.
        activity = {k: v for m in ex.mechanisms for k, v in m.activity().items()}
        acted = {m.name: m.acted() for m in on}
        if self.pool:
            summary.update(self.pool.manifest())
            activity.update(self.pool.activity)
            acted.update(self.pool.mechanisms())
        else:
            summary.update(classical_llm_fields())
            activity.update(dict.fromkeys(LLM_ACTIVITY))
        summary.update({"reject_reasons": list(refusal_reasons(MECHANISMS)),
                        "activity": [[k, v] for k, v in activity.items()],
                        "mechanisms": list(acted),
                        "mechanisms_idle": [m for m, did in acted.items() if not did]})
        tables["summary"] = summary
        return tables


def frame(rows: list[tuple], schema: dict[str, Any]) -> pl.DataFrame:
    """A table from row tuples whose fields are in ``schema``'s column order.

    One transpose, with no list copied per column: the order log has 8,000+ rows a run."""
    columns = zip(*rows, strict=True) if rows else [()] * len(schema)
    return pl.DataFrame(dict(zip(schema, columns, strict=True)), schema=schema)


def _run_client(config: Config, cache_path: str | Path | None):
    """The LLM client of a run with LLM slots, priced from the table its routes are checked
    against (``prices.run_prices``: a row priced for another provider than its route's is
    refused before any call, and a route declared free gets its zero rows); None for a run
    replayed from a frozen library (no client)."""
    llm = config.population.llm
    if llm.frozen_library:
        return None
    # the LLM layer loads only for a run with LLM slots (the pool's caller)
    from market_agents.llm.client import LLMClient
    from market_agents.prices import run_prices

    return LLMClient.from_settings(llm, cache_path, prices=run_prices(llm))


def simulate(config: Config, seed: int, cache_path: str | Path | None = None,
             progress: bool | None = None,
             expected: dict[tuple[int, int], str | None] | None = None,
             expected_from: str = "") -> dict[str, Any]:
    """Run one simulation in memory and return its tables (nothing is written).

    Args:
        config: the validated simulation config.
        seed: the run seed, 0 .. 2**32 - 1; named streams are spawned from it
            (:mod:`market_agents.rng`), so an LLM slot changes that slot's decisions only.
        cache_path: the LLM response cache directory, or None.
        progress: show a progress bar (None: only on a terminal).
        expected: the answer hashes per (tick, slot) of a run this one must reproduce (see
            :class:`~market_agents.agents.llm_trader.LLMTraderPool`), or None.
        expected_from: where ``expected`` came from, for the error message.

    Returns:
        ``{"ticks", "trades", "orders", "agents", "llm_decisions"}``: polars DataFrames with
        the schemas of :data:`market_agents.sim.rundir.SCHEMAS` (ticks: one row per tick and
        asset, ``simulation.ticks × n_assets`` rows), and ``"summary"``: the manifest's run
        fields (conservation, halts, rejects, margin calls, LLM usage and activity).

    Raises:
        RunFailed: the LLM failures passed ``population.llm.max_failure_rate``.
        ReplayMismatch: an answer differs from ``expected``.
        CacheError: the cache is damaged, or a replay misses an answer.

    Protocol:
        Run protocol §6 (same config + seed + cache: byte-identical tables) and §3
        (information parity: every trader, classical or LLM, sees V^pub only).
    """
    run = Run(config, seed, cache_path, progress, expected, expected_from)
    try:
        return run.execute()
    finally:
        if run.pool is not None:
            run.pool.close()
