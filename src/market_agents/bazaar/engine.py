"""The Bazaar engine: ``reset(seed) -> observation``, ``step(text) -> (observation, reward,
done, info)``.

One agent trades one commodity whose fair value is an exogenous seeded index. The terminal score
marks net worth at the final index, so the agent cannot move its reward with its own trades.
Bad moves return ``illegal: <reason>`` in the observation and never raise. This module imports
no training framework; ``verifiers_env`` wraps it.

Turn order: the agent acts against the scripted quote at ``index[t]`` (a taker trade, a new
standing quote, or pass) -> the index steps to ``index[t+1]`` -> (maker tiers) noise flow fills
attractive quotes -> pickoff flow takes quotes left stale by the step -> (credit) interest,
automatic repayment and the margin check.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from market_agents.bazaar import flow
from market_agents.bazaar.parser import Action, Illegal, parse
from market_agents.bazaar.scenario import draw
from market_agents.bazaar.tiers import Tier, get_tier

SPAM_LIMIT = 4  # identical illegal or unparseable messages in a row that end the episode


@dataclass
class Book:
    cash: float
    inventory: int
    debt: float = 0.0
    quote: list | None = None  # standing maker quote [bid, bid_size, ask, ask_size]

    def net_worth(self, index: float) -> float:
        return self.cash + self.inventory * index - self.debt


@dataclass
class Stats:
    trades: int = 0  # taker trades plus maker fills
    realized_spread: float = 0.0  # maker fills: edge earned against the index at quote time
    pickoff_loss: float = 0.0  # pickoff fills: loss against the stepped index
    maker_fills: int = 0
    pickoffs: int = 0
    bait_hits: int = 0
    trigger_hits: int = 0
    interest_paid: float = 0.0
    margin_calls: int = 0
    illegal: int = 0
    bad_turns: set = field(default_factory=set)


class BazaarEnv:
    """A Gymnasium-shaped episode. ``tier`` is a name or a :class:`Tier`."""

    def __init__(self, tier: str | Tier):
        self.tier = get_tier(tier) if isinstance(tier, str) else tier
        self.seed: int | None = None

    # -- episode lifecycle -------------------------------------------------------------------
    def reset(self, seed: int) -> str:
        t = self.tier
        self.seed = int(seed)
        self.sc = draw(t, self.seed)
        self.t = 0
        self.book = Book(cash=float(t.cash), inventory=t.start_inventory)
        self.stats = Stats()
        self.done = False
        self.termination: str | None = None
        self.retry = False  # the current turn already had one illegal attempt
        self.spam_run: list[str] = []
        self.call_pending = False
        self.revealed = {"buy": None, "sell": None}  # smallest edge the agent has taken
        self.transcript: list[dict] = []
        self.last = "episode start"
        self.fills: list[dict] = []
        self._quote_now()
        return self.render()

    def step(self, message: str) -> tuple[str, float, bool, dict]:
        if self.done:
            return self.render(), 0.0, True, {"illegal": "episode is over", **self.summary()}
        action = parse(message)
        if isinstance(action, Action):
            reason = self._check(action)
            if reason is not None:
                action = Illegal(reason)
        record = {"turn": self.t, "message": message}
        if isinstance(action, Illegal):
            self._illegal(message, action.reason, record)
        else:
            self.spam_run = []
            record.update(action=action.text(), legal=True)
            self._play(action)
        info = {"turn": record["turn"], "legal": record["legal"], "fills": list(self.fills)}
        if self.tier.is_maker:  # running totals, so a trainer can log adverse selection per turn
            info.update(realized_spread=self.stats.realized_spread,
                        pickoff_loss=self.stats.pickoff_loss)
        if not record["legal"]:
            info["illegal"] = record["reason"]
        obs = self.render()
        if not record["legal"]:
            obs = f"illegal: {record['reason']}\n{obs}"
        record["observation"] = obs
        self.transcript.append(record)
        reward = 0.0
        if self.done:
            info.update(self.summary())
            reward = info["reward"]
        return obs, reward, self.done, info

    def _illegal(self, message: str, reason: str, record: dict) -> None:
        s = self.stats
        s.illegal += 1
        # The episode's first illegal move is free; later ones cost the turn its format credit.
        if s.illegal > 1:
            s.bad_turns.add(self.t)
        record.update(action=None, legal=False, reason=reason)
        key = " ".join(str(message).split()).lower()
        self.spam_run = self.spam_run + [key] if self.spam_run[-1:] == [key] else [key]
        if len(self.spam_run) >= SPAM_LIMIT:
            self.done, self.termination = True, "spam"
            self.last = f"episode over: {SPAM_LIMIT} identical illegal messages in a row ({reason})"
            return
        if self.retry:
            # A second illegal attempt on the same turn is played as pass, so a model that
            # never produces a legal move still moves the clock and the episode ends.
            self.last = f"illegal twice, played as pass: {reason}"
            self._play(Action("pass"), illegal=True)
        else:
            self.retry = True
            self.last = f"illegal: {reason}; same turn, try again"

    # -- checks ------------------------------------------------------------------------------
    def _check(self, a: Action) -> str | None:
        t, b, q = self.tier, self.book, self.scripted
        if a.kind == "quote":
            if not t.is_maker:
                return f"quote is only allowed on maker tiers; {t.name} takes buy Q, sell Q, pass"
            if max(a.bid_size, a.ask_size) > t.max_size:
                return f"quote size {max(a.bid_size, a.ask_size)} exceeds max size {t.max_size}"
            need = a.bid * a.bid_size
            if need > b.cash + 1e-9:
                return f"bid {a.bid:g} x {a.bid_size} needs {need:.2f}, cash is {b.cash:.2f}"
            if a.ask_size > b.inventory:
                return f"ask size {a.ask_size} exceeds inventory {b.inventory} (no short selling)"
            return None
        if a.kind == "pass":
            return None
        if a.qty > t.max_size:
            return f"{a.kind} {a.qty} exceeds max size {t.max_size}"
        if a.kind == "sell":
            if a.qty > b.inventory:
                return f"sell {a.qty} exceeds inventory {b.inventory} (no short selling)"
            return None
        cost = q["ask"] * min(a.qty, q["ask_exec"])
        if cost > self.buying_power() + 1e-9:
            return f"buy {a.qty} costs {cost:.2f}, buying power is {self.buying_power():.2f}"
        return None

    def buying_power(self) -> float:
        b, t = self.book, self.tier
        if not t.has_credit:
            return b.cash
        equity = b.net_worth(self.index)
        return b.cash + max(0.0, t.loan_ratio * equity - b.debt)

    # -- one turn ----------------------------------------------------------------------------
    @property
    def index(self) -> float:
        return float(self.sc.index[self.t])

    def _quote_now(self) -> None:
        self.scripted = flow.scripted_quote(self.tier, self.sc, self.t, self.revealed)

    def _play(self, a: Action, illegal: bool = False) -> None:
        b = self.book
        self.fills = []
        if not illegal:
            self.last = a.text()
        if a.kind in ("buy", "sell"):
            self._take(a)
        elif a.kind == "quote":
            b.quote = [a.bid, a.bid_size, a.ask, a.ask_size]
        self.t += 1
        if self.tier.is_maker and b.quote is not None:
            self.fills = flow.maker_flow(self.tier, self.sc, self.t - 1, b, self.stats)
            if self.fills:
                self.stats.trades += len(self.fills)
        if self.tier.has_credit:
            self._credit()
        self.retry = False
        if not self.done and self.t >= self.tier.horizon:
            self.done, self.termination = True, "horizon"
        if not self.done:
            self._quote_now()

    def _take(self, a: Action) -> None:
        b, q, s = self.book, self.scripted, self.stats
        side = a.kind
        exec_qty = min(a.qty, q[f"{'ask' if side == 'buy' else 'bid'}_exec"])
        price = q["ask"] if side == "buy" else q["bid"]
        edge = (self.index - price) if side == "buy" else (price - self.index)
        if q.get("bait") and exec_qty < a.qty:
            s.bait_hits += 1
        if q.get("trigger") == side:
            s.trigger_hits += 1
        if side == "buy":
            cost = price * exec_qty
            pay = min(cost, b.cash)
            b.cash -= pay
            b.debt += cost - pay  # automatic margin loan on credit tiers (checked in _check)
            b.inventory += exec_qty
        else:
            b.cash += price * exec_qty
            b.inventory -= exec_qty
        s.trades += 1
        if edge > 0:
            prev = self.revealed[side]
            self.revealed[side] = edge if prev is None else min(prev, edge)
        self.last = f"{side} {exec_qty} @ {price:.2f}" + (
            f" (only {exec_qty} of {a.qty} executable)" if exec_qty < a.qty else ""
        )

    def _credit(self) -> None:
        b, t, s = self.book, self.tier, self.stats
        if b.debt > 0:
            charge = b.debt * t.interest
            b.debt += charge
            s.interest_paid += charge
            repay = min(b.cash, b.debt)
            b.cash -= repay
            b.debt -= repay
        equity = b.net_worth(self.index)
        if b.debt > 1e-9 and equity < t.margin_call * b.debt:
            if self.call_pending:
                self.done, self.termination = True, "default"
                return
            self.call_pending = True
            s.margin_calls += 1
        else:
            self.call_pending = False

    # -- observation and score ---------------------------------------------------------------
    def state(self) -> dict:
        b, t = self.book, self.tier
        out = {
            "turn": self.t,
            "turns": t.horizon,
            "index": round(self.index, 2),
            "cash": round(b.cash, 2),
            "inventory": b.inventory,
            "net_worth": round(b.net_worth(self.index), 2),
            "last": self.last,
        }
        if not self.done:
            q = self.scripted
            out.update(bid=q["bid"], bid_size=q["bid_size"], ask=q["ask"], ask_size=q["ask_size"])
        if t.is_maker:
            out["quote"] = b.quote
            out["fills"] = self.fills
        if t.has_credit:
            out.update(debt=round(b.debt, 2), buying_power=round(self.buying_power(), 2),
                       margin_call=self.call_pending)
        if self.done:
            out.update(done=True, end=self.termination, score=round(self.summary()["score"], 6))
        return out

    def render(self) -> str:
        return json.dumps(self.state(), separators=(",", ":"))

    def summary(self) -> dict:
        t, b, s = self.tier, self.book, self.stats
        played = max(self.t, 1)
        nw = b.net_worth(self.index)
        score = nw / t.start_net_worth()
        format_frac = 1.0 - len(s.bad_turns) / played
        trade_bonus = t.first_trade_bonus if s.trades > 0 else 0.0
        format_bonus = t.format_bonus * format_frac
        if self.termination == "default":
            score, trade_bonus, format_bonus = 0.0, 0.0, 0.0
        elif self.termination == "spam":
            trade_bonus, format_bonus = 0.0, 0.0
        return {
            "score": score,
            "reward": score + trade_bonus + format_bonus,
            "format_bonus": format_bonus,
            "trade_bonus": trade_bonus,
            "termination": self.termination,
            "turns_played": self.t,
            "net_worth": nw,
            "trades": s.trades,
            "illegal": s.illegal,
            "maker_fills": s.maker_fills,
            "realized_spread": s.realized_spread,
            "pickoffs": s.pickoffs,
            "pickoff_loss": s.pickoff_loss,
            "bait_hits": s.bait_hits,
            "trigger_hits": s.trigger_hits,
            "interest_paid": s.interest_paid,
            "margin_calls": s.margin_calls,
            "final_debt": b.debt,
        }
