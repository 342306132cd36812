"""Run spend caps (``usd_cap``), per-provider caps and per-agent decision caps.

Caps apply to the *priced* cost of every answer, the mock's included (priced at its model id,
``mock-trader`` at 0), so a mock rehearsal halts where the live run would; no real money is
involved there (that is ``usd_spent``, kept by the client). Cache hits are charged their
recorded cost, so a replay reaches a budget halt at the same decision as the run it replays.
Before a call is sent the budget asks whether its *estimated* cost would take spend past a cap:
the mean recorded cost of that model so far, or the planning profile before any call. Checks
run in input order and depend only on settled results, so they never depend on latency.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from market_agents.errors import BudgetExceeded


@dataclass
class Budget:
    usd_cap: float | None  # None: no run cap
    provider_caps: dict[str, float] = field(default_factory=dict)  # route -> USD
    decision_cap: int | None = None  # per agent
    planned: Callable[[str], float] = lambda model: 0.0  # model -> planning cost of one call
    spent: float = 0.0
    spent_by_route: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    halted_routes: set[str] = field(default_factory=set)
    halted: bool = False
    halts: list[dict] = field(default_factory=list)
    _decisions: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    _model_cost: dict[str, list[float]] = field(
        default_factory=lambda: defaultdict(lambda: [0.0, 0]))
    _reserved: float = 0.0
    _reserved_by_route: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    def estimate(self, model: str) -> float:
        total, n = self._model_cost[model]
        return total / n if n else self.planned(model)

    def admit(self, agent: str, route: str, model: str, where: str = "") -> float:
        """Reserve one call or raise BudgetExceeded (``.scope``: decision_cap | run | provider)."""
        if self.decision_cap is not None and agent:
            if self._decisions[agent] >= self.decision_cap:
                raise _exceeded("decision_cap", f"{agent}: decision_cap {self.decision_cap} "
                                                "reached")
            self._decisions[agent] += 1
        if self.halted or route in self.halted_routes:
            raise _exceeded("budget_halt", f"{route}: LLM spend halted earlier in this run")
        est = self.estimate(model)
        if self.usd_cap is not None and self.spent + self._reserved + est > self.usd_cap + 1e-12:
            self.halted = True
            self.halts.append({"scope": "run", "at": where, "spent": self.spent,
                               "cap": self.usd_cap})
            raise _exceeded("budget_halt", f"usd_cap {self.usd_cap} would be passed "
                                           f"(spent {self.spent:.6f}, next ≈ {est:.6f})")
        cap = self.provider_caps.get(route)
        spent_route = self.spent_by_route[route] + self._reserved_by_route[route]
        if cap is not None and spent_route + est > cap + 1e-12:
            self.halted_routes.add(route)
            self.halts.append({"scope": f"provider:{route}", "at": where,
                               "spent": self.spent_by_route[route], "cap": cap})
            raise _exceeded("budget_halt", f"providers.{route}.usd_cap {cap} would be passed")
        self._reserved += est
        self._reserved_by_route[route] += est
        return est

    def settle(self, route: str, model: str, reserved: float, usd: float | None) -> None:
        """Release a reservation and charge the recorded cost (None: no answer, no charge)."""
        self._reserved -= reserved
        self._reserved_by_route[route] -= reserved
        if usd is None:
            return
        self.spent += usd
        self.spent_by_route[route] += usd
        acc = self._model_cost[model]
        acc[0] += usd
        acc[1] += 1


def _exceeded(scope: str, message: str) -> BudgetExceeded:
    exc = BudgetExceeded(message)
    exc.scope = scope  # type: ignore[attr-defined]
    return exc
