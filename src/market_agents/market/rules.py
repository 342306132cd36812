"""Exchange rules that watch the market after each tick and act through public methods only."""

from __future__ import annotations

from market_agents.config import ExchangeConfig
from market_agents.market.exchange import Exchange
from market_agents.market.types import BUY, SELL, Cancel, Order


class CircuitBreaker:
    """Halt trading for ``halt_ticks`` when the last price moves by ``halt_threshold`` or more
    against its level ``halt_window`` ticks ago."""

    def __init__(self, cfg: ExchangeConfig, n_assets: int):
        self.cfg = cfg
        self.history: list[list[int]] = [[] for _ in range(n_assets)]

    def on_after_tick(self, ex: Exchange) -> None:
        for asset, hist in enumerate(self.history):
            hist.append(ex.last[asset])
            if len(hist) > self.cfg.halt_window + 1:
                hist.pop(0)
            if ex.halted or len(hist) <= self.cfg.halt_window:
                continue
            if abs(hist[-1] / hist[0] - 1.0) >= self.cfg.halt_threshold:
                ex.halt(until=ex.tick + 1 + self.cfg.halt_ticks)
                hist.clear()


class MarginCall:
    """Liquidate a leveraged account whose equity falls below ``maintenance_margin`` of its
    gross position value: cancel its orders and close every position at a marketable price."""

    def __init__(self, cfg: ExchangeConfig):
        self.cfg = cfg
        self.calls = 0

    def on_after_tick(self, ex: Exchange) -> None:
        if ex.halted:
            return
        for acct in ex.accounts.values():
            if acct.leverage <= 1.0 or not any(acct.shares):
                continue
            gross = sum(abs(s) * ex.mid_ticks(i) for i, s in enumerate(acct.shares))
            if ex.equity(acct) >= self.cfg.maintenance_margin * gross:
                continue
            self.calls += 1
            ex.submit(acct.slot, Cancel())
            for asset, held in enumerate(acct.shares):
                if held:
                    side = SELL if held > 0 else BUY
                    price = ex.mid[asset] * (1 + 0.02 * side)
                    ex.submit(acct.slot, Order(side, abs(held), round(price, 2), asset, ttl=1))
