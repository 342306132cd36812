"""Run spend caps (``usd_cap``), per-provider caps and per-agent decision caps: a hard cap.

Caps apply to the *priced* cost of every answer, the mock's included (priced at its model id,
``mock-trader`` at 0), so a mock rehearsal halts where the live run would; no real money is
involved there (that is ``usd_spent``, kept by the client). Cache hits are charged their
recorded cost, so a replay reaches a budget halt at the same decision as the run it replays.

Before a call is sent the budget reserves its *worst case* (the request's input-token bound
plus ``max_output_tokens``, all at full price: cached-input discounts ignored) and refuses the
call if spent + reserved + worst case would pass a cap; when the answer arrives the reservation
is released and the priced cost charged. So recorded spend never exceeds the cap, whatever the
concurrency. Checks run in input order and depend only on settled results of earlier batches,
so they never depend on latency or arrival order.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from market_agents.errors import BudgetExceeded

EPS = 1e-12  # float slack on cap comparisons


@dataclass
class Budget:
    """The runtime caps of one run: the run's USD cap, per-route caps, per-agent decision caps.

    One per run, shared by every call of the run's :class:`~market_agents.llm.client.LLMClient`
    (cache look-up, then this budget's reservation, claim, provider, price, store, and
    this budget's settlement). Amounts are USD of *priced* cost.

    Attributes:
        usd_cap: the run cap in USD (``population.llm.usd_cap``); None: no run cap.
        provider_caps: route -> cap in USD (``providers.<route>.usd_cap``).
        decision_cap: decisions per agent (None: no cap).
        spent: priced USD charged so far; ``spent_by_route`` the same per route.
        halted: the run cap was reached (final); ``halted_routes`` the routes halted.
        halts: one record per halt (scope, where, tick, spent, reserved, next worst, cap),
            copied into manifest.json.
        over_cap_usd: priced cost beyond the cap (0 unless a token bound was wrong).

    Protocol:
        Run protocol §1 (hard limits: per-run ``usd_cap``; the project and pilot caps are the
        spend ledger's, :mod:`market_agents.protocol.ledger`).
    """

    usd_cap: float | None  # None: no run cap
    provider_caps: dict[str, float] = field(default_factory=dict)  # route -> USD
    decision_cap: int | None = None  # per agent
    spent: float = 0.0
    spent_by_route: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    halted_routes: set[str] = field(default_factory=set)
    halted: bool = False
    halts: list[dict] = field(default_factory=list)
    over_cap_usd: float = 0.0  # priced cost beyond the cap (0 unless a bound was wrong)
    _decisions: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    _reserved: float = 0.0
    _reserved_by_route: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    @property
    def reserved(self) -> float:
        """USD reserved by calls in flight (their worst cases), not yet settled."""
        return self._reserved

    def admit(self, agent: str, route: str, worst_usd: float, where: str = "",
              tick: int | None = None) -> float:
        """Reserve a call's worst-case cost before it is sent, or refuse the call.

        Args:
            agent: the agent id the decision cap counts against ("" for none).
            route: the provider route (``population.llm.provider_mix`` key) of the call.
            worst_usd: the call's worst case in USD: its input-token bound plus
                ``max_output_tokens``, at full price.
            where: where the call comes from, for the halt record.
            tick: the market tick of the decision, for the halt record.

        Returns:
            The USD reserved (``worst_usd``), to hand back to :meth:`settle`.

        Raises:
            BudgetExceeded: ``.scope`` is ``decision_cap`` (the agent's cap is reached) or
                ``budget_halt`` (spent + reserved + ``worst_usd`` would pass the run or route
                cap; the halt is final for the run or route, and recorded in ``halts``).
        """
        if self.decision_cap is not None and agent:
            if self._decisions[agent] >= self.decision_cap:
                raise _exceeded("decision_cap", f"{agent}: decision_cap {self.decision_cap} "
                                                "reached")
            self._decisions[agent] += 1
        if self.halted or route in self.halted_routes:
            raise _exceeded("budget_halt", f"{route}: LLM spend halted earlier in this run")
        if self.usd_cap is not None and (self.spent + self._reserved + worst_usd
                                         > self.usd_cap + EPS):
            self.halted = True
            self._halt("run", where, tick, self.spent, self._reserved, self.usd_cap, worst_usd)
            raise _exceeded("budget_halt", f"usd_cap {self.usd_cap} could be passed (spent "
                                           f"{self.spent:.6f}, reserved {self._reserved:.6f},"
                                           f" next call up to {worst_usd:.6f})")
        cap = self.provider_caps.get(route)
        if cap is not None and (self.spent_by_route[route] + self._reserved_by_route[route]
                                + worst_usd > cap + EPS):
            self.halted_routes.add(route)
            self._halt(f"provider:{route}", where, tick, self.spent_by_route[route],
                       self._reserved_by_route[route], cap, worst_usd)
            raise _exceeded("budget_halt", f"providers.{route}.usd_cap {cap} could be passed")
        self._reserved += worst_usd
        self._reserved_by_route[route] += worst_usd
        return worst_usd

    def extend(self, route: str, worst_usd: float) -> bool:
        """Reserve one more worst case for a call in flight (a retry after an attempt the
        provider may have billed, which is charged), if every cap has room for it.

        Args:
            route: the route of the call.
            worst_usd: the retry's worst case in USD.

        Returns:
            True when reserved (release it with the call's :meth:`settle`); False when a cap
            would be passed: nothing is reserved and nothing halted (the call is not retried,
            and the next admission decides as it would on a replay of the record).
        """
        if self.usd_cap is not None and (self.spent + self._reserved + worst_usd
                                         > self.usd_cap + EPS):
            return False
        cap = self.provider_caps.get(route)
        if cap is not None and (self.spent_by_route[route] + self._reserved_by_route[route]
                                + worst_usd > cap + EPS):
            return False
        self._reserved += worst_usd
        self._reserved_by_route[route] += worst_usd
        return True

    def _halt(self, scope: str, where: str, tick: int | None, spent: float, reserved: float,
              cap: float, next_usd: float) -> None:
        self.halts.append({"scope": scope, "at": where, "tick": tick, "spent": round(spent, 10),
                           "reserved": round(reserved, 10), "next_worst": round(next_usd, 10),
                           "cap": cap})

    def settle(self, route: str, reserved: float, usd: float | None) -> None:
        """Release a reservation and charge the priced cost of the answer.

        Args:
            route: the route the reservation was made for.
            reserved: the USD :meth:`admit` returned for the call.
            usd: the answer's priced cost in USD (a cache hit: its recorded cost); None when
                no answer came (a failure): nothing is charged.
        """
        self._reserved -= reserved
        self._reserved_by_route[route] -= reserved
        if usd is None:
            return
        self.spent += usd
        self.spent_by_route[route] += usd
        if self.usd_cap is not None and self.spent > self.usd_cap + EPS:
            self.over_cap_usd = self.spent - self.usd_cap


def _exceeded(scope: str, message: str) -> BudgetExceeded:
    exc = BudgetExceeded(message)
    exc.scope = scope  # type: ignore[attr-defined]
    return exc
