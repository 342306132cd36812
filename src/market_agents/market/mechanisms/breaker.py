"""The circuit breaker (``exchange.halt_threshold``, ``halt_window``, ``halt_ticks``)."""

from __future__ import annotations

from market_agents.market.mechanism import Mechanism
from market_agents.plugins import MECHANISMS


@MECHANISMS.register
class CircuitBreaker(Mechanism):
    """Halt trading for ``halt_ticks`` when the last price moves by ``halt_threshold`` or more
    against any of its levels in the last ``halt_window`` ticks (protocol: "5 % within 10
    ticks"; a price band around a rolling reference, as the U.S. limit up-limit down rule).

    It compared the price with its level exactly ``halt_window`` ticks before, so a 5 % move
    that reverted a little within the window went unseen; with a market that prices news at
    once and no longer overshoots (issue 23), the exploratory design's breaker cell then never
    halted (a 5.15 % move within 10 ticks in seed 2)."""

    name = "breaker"
    measures = ("n_halts",)

    def __init__(self, config, ex):
        super().__init__(config, ex)
        self.cfg = config.exchange
        self.history: list[list[int]] = [[] for _ in range(ex.n_assets)]
        self.halts = 0

    @classmethod
    def installed(cls, config) -> bool:
        """When ``exchange.halt_threshold`` is set."""
        return config.exchange.halt_threshold is not None

    def end_tick(self) -> None:
        """Halt trading when the price moved ``halt_threshold`` or more within ``halt_window``
        ticks."""
        ex = self.ex
        for asset, hist in enumerate(self.history):
            hist.append(ex.last[asset])
            if len(hist) > self.cfg.halt_window + 1:
                hist.pop(0)
            if ex.halted or len(hist) <= self.cfg.halt_window:
                continue
            now, lo, hi = hist[-1], min(hist), max(hist)
            if max(now / lo - 1.0, 1.0 - now / hi) >= self.cfg.halt_threshold:
                ex.halt(until=ex.tick + 1 + self.cfg.halt_ticks)
                self.halts += 1
                hist.clear()

    def acted(self) -> bool:
        """Whether it halted trading at least once."""
        return self.halts > 0
