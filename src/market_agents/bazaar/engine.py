"""The Bazaar engine: ``reset(seed) -> observation``, ``step(text) -> (observation, reward,
done, info)``.

One agent trades one commodity whose fair value is an exogenous seeded index. The terminal score
marks equity at the final index, so the agent cannot move its reward with its own trades. Bad
moves return ``illegal: <reason>`` in the observation and never raise. The mechanics are the
public Bazaar environment's (docs/bazaar.md); this module imports no training framework, no
market engine and no LLM layer (``verifiers_env`` wraps it).

Turn order: the agent acts against the scripted quote of turn t at ``index[t]`` (a taker trade,
a new standing quote, or pass) -> the index steps to ``index[t+1]`` -> (maker tiers) noise flow,
then informed flow, trade against the standing quote -> (credit) surplus cash repays the loan,
interest accrues, and the margin check runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from market_agents.bazaar import flow
from market_agents.bazaar.parser import Action, Illegal, parse
from market_agents.bazaar.scenario import draw
from market_agents.bazaar.tiers import Tier, cents, get_tier

SPAM_LIMIT = 4  # identical illegal or unreadable messages in a row that end the episode


@dataclass
class Book:
    """The agent's book: cash, inventory, debt (credit tiers) and its standing quote (maker
    tiers).
    """

    cash: float
    inventory: int
    debt: float = 0.0
    quote: list | None = None  # standing maker quote [bid, bid_size, ask, ask_size]

    def equity(self, index: float) -> float:
        """Cash plus inventory marked at ``index``, less debt, in cents."""
        return cents(cents(self.cash + self.inventory * index) - self.debt)


@dataclass
class Stats:
    """What an episode did: trades, maker fills, realized spread and pick-offs, bait and
    trigger hits, interest paid, margin calls and illegal replies.
    """

    trades: int = 0  # taker trades plus maker fills
    maker_fills: int = 0  # units filled against the standing quote
    realized_spread: float = 0.0  # fills: edge earned against the stepped index
    pickoff_loss: float = 0.0  # informed fills: loss against the stepped index
    pickoffs: int = 0
    bait_hits: int = 0  # orders refused because a juicy quote executed less than it showed
    trigger_hits: int = 0  # takes of a quote posted inside the agent's revealed trigger
    interest_paid: float = 0.0
    margin_calls: int = 0
    illegal: int = 0
    bad_turns: set = field(default_factory=set)  # turns lost to an illegal or unreadable reply


class BazaarEnv:
    """A Gymnasium-shaped episode. ``tier`` is a name or a :class:`Tier`."""

    def __init__(self, tier: str | Tier):
        self.tier = get_tier(tier) if isinstance(tier, str) else tier
        self.seed: int | None = None

    # -- episode lifecycle -------------------------------------------------------------------
    def reset(self, seed: int) -> str:
        """Start the episode of ``seed`` (its seeded world) and return the first observation
        (compact JSON).
        """
        t = self.tier
        self.seed = int(seed)
        self.sc = draw(t, self.seed)
        self.t = 0
        self.book = Book(cash=float(t.cash), inventory=t.start_inventory)
        self.stats = Stats()
        self.done = False
        self.termination: str | None = None
        self.free_mistake_used = False
        self.spam_key: str | None = None
        self.spam_count = 0
        self.call_pending = False
        self.trigger = flow.Trigger()
        self.transcript: list[dict] = []
        self.last = "episode start"
        self.fills: list[dict] = []
        self._quote_now()
        return self.render()

    def step(self, message: str) -> tuple[str, float, bool, dict]:
        """Play one reply; returns (observation, reward, done, info). The reward is 0 until the
        episode ends, then the full reward (score + bonuses)."""
        if self.done:
            return self.render(), 0.0, True, {"illegal": "episode is over", **self.summary()}
        action = parse(message)
        if isinstance(action, Action):
            reason = self._check(action)
            if reason is not None:
                action = Illegal(reason)
        record = {"turn": self.t, "message": message}
        if isinstance(action, Illegal):
            record.update(action=None, legal=False, reason=action.reason)
            self._illegal(message, action.reason)
        else:
            self.spam_key, self.spam_count = None, 0
            record.update(action=action.text(), legal=True)
            self._play(action)
        info = {"turn": record["turn"], "legal": record["legal"], "fills": list(self.fills)}
        if self.tier.is_maker:  # running totals, so a trainer can log adverse selection per turn
            info.update(realized_spread=self.stats.realized_spread,
                        pickoff_loss=self.stats.pickoff_loss)
        obs = self.render()
        if not record["legal"]:
            info["illegal"] = record["reason"]
            obs = f"illegal: {record['reason']}\n{obs}"
        record["observation"] = obs
        self.transcript.append(record)
        reward = 0.0
        if self.done:
            info.update(self.summary())
            reward = info["reward"]
        return obs, reward, self.done, info

    def _illegal(self, message: str, reason: str) -> None:
        """The episode's first illegal or unreadable reply is free (no turn used); each later one
        loses its turn, which plays out as a pass, and its format credit."""
        self.stats.illegal += 1
        self.fills = []
        key = " ".join(str(message).split()).lower()
        self.spam_count = self.spam_count + 1 if key == self.spam_key else 1
        self.spam_key = key
        if not self.free_mistake_used:
            self.free_mistake_used = True
            self.last = f"illegal: {reason}; no turn used (the episode's one free mistake)"
        else:
            self.stats.bad_turns.add(self.t)
            self.last = f"illegal: {reason}; the turn is lost"
            self._settle()
        if self.spam_count >= SPAM_LIMIT and not self.done:
            self.done, self.termination = True, "spam"
            self.last = f"episode over: {SPAM_LIMIT} identical illegal messages in a row ({reason})"

    # -- checks ------------------------------------------------------------------------------
    def _check(self, a: Action) -> str | None:
        t, b, q = self.tier, self.book, self.scripted
        if a.kind == "quote":
            if not t.is_maker:
                return f"quote is only allowed on maker tiers; {t.name} takes buy Q, sell Q, pass"
            if max(a.bid_size, a.ask_size) > t.max_size:
                return f"quote size {max(a.bid_size, a.ask_size)} exceeds max size {t.max_size}"
            return None
        if a.kind == "pass":
            return None
        side = "ask" if a.kind == "buy" else "bid"
        shown = q.ask_size if a.kind == "buy" else q.bid_size
        executable = flow.executable(t, self.sc, self.t, q, a.kind)
        if a.qty > executable:
            if executable < shown:
                self.stats.bait_hits += 1
                return f"displayed {side} size {shown} but only {executable} executable"
            return f"{a.kind} {a.qty} exceeds the {side} size {shown}"
        if a.kind == "sell":
            if a.qty > b.inventory:
                return f"sell {a.qty} exceeds inventory {b.inventory} (no short selling)"
            return None
        cost = q.ask * a.qty
        if cost > self.buying_power() + 1e-9:
            return (f"buy {a.qty} costs {cost:.2f}, "
                    f"{'buying power' if t.has_credit else 'cash'} is {self.buying_power():.2f}")
        return None

    def buying_power(self) -> float:
        """Cash, plus on credit tiers what may still be borrowed (debt up to loan_ratio x
        equity)."""
        b, t = self.book, self.tier
        if not t.has_credit:
            return b.cash
        room = cents(max(0.0, t.loan_ratio * b.equity(self.index) - b.debt))
        return cents(b.cash + room)

    # -- one turn ----------------------------------------------------------------------------
    @property
    def index(self) -> float:
        """The exogenous index (fair value) at the current turn."""
        return self.sc.index[self.t]

    def _quote_now(self) -> None:
        self.scripted, self.hunting = flow.scripted_quote(self.tier, self.sc, self.t, self.trigger)

    def _play(self, a: Action) -> None:
        self.fills = []
        self.last = a.text()
        if a.kind in ("buy", "sell"):
            self._take(a)
        elif a.kind == "quote":
            self.book.quote = [a.bid, a.bid_size, a.ask, a.ask_size]
        self._settle()

    def _take(self, a: Action) -> None:
        b, q, s = self.book, self.scripted, self.stats
        price = q.ask if a.kind == "buy" else q.bid
        edge = cents(self.index - price if a.kind == "buy" else price - self.index)
        if self.hunting and self.trigger.side == a.kind:
            s.trigger_hits += 1
        if a.kind == "buy":
            self._pay(price * a.qty)
            b.inventory += a.qty
        else:
            b.cash = cents(b.cash + price * a.qty)
            b.inventory -= a.qty
        s.trades += 1
        self.trigger.record(a.kind, edge)
        self.last = f"{a.kind} {a.qty} @ {price:.2f}"

    def _pay(self, cost: float) -> None:
        """Pay from cash; on credit tiers a shortfall is drawn on the margin loan (the checks
        have kept it within buying power)."""
        b = self.book
        cash = cents(b.cash - cost)
        if cash < 0:
            b.debt = cents(b.debt - cash)
            cash = 0.0
        b.cash = cash

    def _settle(self) -> None:
        """The world moves one turn: the index steps, flow trades against a standing quote, and
        the loan is repaid, charged and checked. Every consumed turn passes through here."""
        self.t = min(self.t + 1, self.tier.horizon)
        if self.tier.is_maker and self.book.quote is not None:
            flow.maker_flow(self.tier, self.sc, self.t, self.book.quote, self._fill)
        if self.tier.has_credit:
            self._credit()
        if not self.done and self.t >= self.tier.horizon:
            self.done, self.termination = True, "horizon"
        if not self.done:
            self._quote_now()

    def _fill(self, side: str, qty: int, price: float, by: str) -> int:
        """Fill the agent's ``side`` of its standing quote after the step; returns the units
        traded (buys are limited by buying power, sells by inventory)."""
        b, s, index = self.book, self.stats, self.index
        if side == "buy":
            qty = min(qty, int(self.buying_power() // price)) if price > 0 else 0
        else:
            qty = min(qty, b.inventory)
        if qty <= 0:
            return 0
        edge = index - price if side == "buy" else price - index
        if side == "buy":
            self._pay(price * qty)
            b.inventory += qty
        else:
            b.cash = cents(b.cash + price * qty)
            b.inventory -= qty
        s.trades += 1
        s.maker_fills += qty
        s.realized_spread = cents(s.realized_spread + max(0.0, edge * qty))
        if by == "pickoff":
            s.pickoffs += 1
            s.pickoff_loss = cents(s.pickoff_loss + max(0.0, -edge * qty))
        self.fills.append({"side": side, "price": price, "qty": qty, "by": by})
        return qty

    def _credit(self) -> None:
        b, t, s = self.book, self.tier, self.stats
        if b.debt > 0 and b.cash > 0:  # surplus cash repays the loan: idle debt cannot exist
            repay = cents(min(b.cash, b.debt))
            b.cash, b.debt = cents(b.cash - repay), cents(b.debt - repay)
        if b.debt <= 0:
            self.call_pending = False
            return
        charge = cents(b.debt * t.interest)
        b.debt = cents(b.debt + charge)
        s.interest_paid = cents(s.interest_paid + charge)
        if b.equity(self.index) < t.margin_call * b.debt:
            if self.call_pending:
                self.done, self.termination = True, "default"
                self.last = "default: the margin call was not cured; episode over"
                return
            self.call_pending = True
            s.margin_calls += 1
        else:
            self.call_pending = False

    # -- observation and score ---------------------------------------------------------------
    def state(self) -> dict:
        """The observation as a dict: turn, index, cash, inventory, net worth, the last reply's
        effect and the scripted quote (plus quote and fills on maker tiers, debt, buying power and
        margin call on credit tiers).
        """
        b, t = self.book, self.tier
        out = {
            "turn": self.t,
            "turns": t.horizon,
            "index": self.index,
            "cash": b.cash,
            "inventory": b.inventory,
            "net_worth": b.equity(self.index),
            "last": self.last,
        }
        if not self.done:
            q = self.scripted
            out.update(bid=q.bid, bid_size=q.bid_size, ask=q.ask, ask_size=q.ask_size)
        if t.is_maker:
            out["quote"] = b.quote
            out["fills"] = self.fills
        if t.has_credit:
            out.update(debt=b.debt, buying_power=self.buying_power(),
                       margin_call=self.call_pending)
        if self.done:
            out.update(done=True, end=self.termination, score=round(self.summary()["score"], 6))
        return out

    def render(self) -> str:
        """The observation as compact JSON text (what the agent reads)."""
        return json.dumps(self.state(), separators=(",", ":"))

    def summary(self) -> dict:
        """Score (equity at the index over starting net worth, floored at 0; 0 on a default),
        the bonuses, and the episode's statistics."""
        t, b, s = self.tier, self.book, self.stats
        played = max(self.t, 1)
        equity = b.equity(self.index)
        score = max(0.0, equity / t.start_net_worth())
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
            "net_worth": equity,
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
