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
        return self._reserved

    def admit(self, agent: str, route: str, worst_usd: float, where: str = "",
              tick: int | None = None) -> float:
        """Reserve ``worst_usd`` (USD, the call's worst case) or raise BudgetExceeded
        (``.scope``: decision_cap | budget_halt). A halt is final for the run (or route)."""
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

    def _halt(self, scope: str, where: str, tick: int | None, spent: float, reserved: float,
              cap: float, next_usd: float) -> None:
        self.halts.append({"scope": scope, "at": where, "tick": tick, "spent": round(spent, 10),
                           "reserved": round(reserved, 10), "next_worst": round(next_usd, 10),
                           "cap": cap})

    def settle(self, route: str, reserved: float, usd: float | None) -> None:
        """Release a reservation and charge the priced cost (None: no answer, no charge)."""
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
