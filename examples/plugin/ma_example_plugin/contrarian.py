"""The ``contrarian`` trader type: leans against the last move."""

from __future__ import annotations

import math

from market_agents.agents.base import Trader, opening_holdings, ref_price, toward, withdraw
from market_agents.plugins import TRADERS


@TRADERS.register
class Contrarian(Trader):
    """Holds more of the asset after a fall and less after a rise over its look-back:
    h* = h0·(1 − tanh(γ·ln(P_t / P_{t−k}))), around its opening holding h0, with a limit
    through the reference price by its slippage. The negative-feedback traders of the
    heterogeneous-agent literature (e.g. Lux & Marchesi 1999's fundamentalists' mirror).

    A trader type names itself (``name``: what ``population.mix`` calls it), draws its
    parameters from its own generator once, and decides from its view only."""

    name = "contrarian"

    def __init__(self, slot, rng):
        super().__init__(slot, rng)
        self.lookback = int(rng.integers(5, 15))  # ticks
        self.gamma = 0.549 / rng.uniform(0.003, 0.01)  # half the swing at a 0.3-1 % move
        self.slippage = rng.uniform(0.001, 0.003)
        self.qty = int(rng.integers(2, 6))  # shares per decision
        self.h0 = None

    def decide(self, view):
        """Move the holding toward h0·(1 − tanh(γ·move)), with a limit through the price."""
        out = withdraw(view)
        if self.h0 is None:
            self.h0 = opening_holdings(view)
        for a in view.assets:
            p = a.recent_prices
            if a.halted or len(p) <= self.lookback:
                continue
            move = math.log(p[-1] / p[-1 - self.lookback])
            target = int(round(self.h0[a.asset] * (1.0 - math.tanh(self.gamma * move))))
            side = 1 if target > a.shares else -1  # buy or sell
            price = ref_price(a) * (1 + side * self.slippage)
            out.extend(toward(a, target, price, self.qty, ttl=0))  # immediate-or-cancel
        return out
