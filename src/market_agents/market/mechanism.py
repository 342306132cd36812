"""The mechanism contract: a market rule on the exchange's events (design: "open to the
researcher"; PAMS's events with execution hooks are the model).

A mechanism is one class in its own module, registered with
``@market_agents.plugins.MECHANISMS.register`` (built-ins: ``market/mechanisms/``; installed
ones: the ``market_agents.mechanisms`` entry-point group). The exchange calls the mechanisms a
run switches on at three events, each a method a mechanism may define:

- :meth:`Mechanism.admit` when an order is admitted (after the halt check, before the funds
  check): return a reason to refuse it (``orders.parquet``'s ``reason``), or None;
- :meth:`Mechanism.on_fill` after each fill, with both accounts, the price and the quantity;
- :meth:`Mechanism.end_tick` at the end of each tick (after a call auction and the mids).

It acts only through the exchange's public methods: refuse an order, :meth:`Exchange.charge`
or :meth:`Exchange.credit` cash (kept in the exchange's pot, so cash stays conserved),
:meth:`Exchange.halt`, :meth:`Exchange.submit` an order on an account's behalf; and it records
its activity (:meth:`Mechanism.activity`), which the run writes to manifest.json under
``activity`` and outcomes, ``ma summary``, the estimands and the paper read from there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from market_agents.market.exchange import Exchange
from market_agents.plugins import MECHANISMS

if TYPE_CHECKING:
    from market_agents.config import Config


class Mechanism:
    """A market rule the exchange calls at its events.

    Class attributes a mechanism sets:
        name: its registry name, as outcomes' ``mechanisms`` column spells it.
        key: its switch under ``exchange`` in a config for a mechanism that brings its own
            (``exchange.<key>: <value>``; None: it reads the exchange config's own fields).
        settings: the type of that value (a pydantic annotation, e.g.
            ``Annotated[float, Field(gt=0, lt=1)]``), validated with the config.
        refusals: the reasons it may refuse an order with (outcomes count each as
            ``rejects_<reason>`` in every run).
        activity_labels: its activity counts (outcome name -> ``(short label, format)`` for
            ``ma summary`` and the paper), as :meth:`activity` returns them.
        measures: the paper's outcomes that measure it, estimated only for a cell that
            switches it on (``analysis.stats.applies``).
    """

    name: ClassVar[str]
    key: ClassVar[str | None] = None
    settings: ClassVar[Any] = None
    refusals: ClassVar[tuple[str, ...]] = ()
    refusal_labels: ClassVar[dict[str, str]] = {}
    activity_labels: ClassVar[dict[str, tuple[str, str]]] = {}
    measures: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config: Config, ex: Exchange):
        self.config = config
        self.ex = ex

    @classmethod
    def installed(cls, config: Config) -> bool:
        """Whether a run of ``config`` runs this mechanism: by default, when its switch
        (``exchange.<key>``) is set."""
        return cls.setting(config) is not None

    @classmethod
    def setting(cls, config: Config) -> Any:
        """The value of its switch in ``config`` (None: not set)."""
        return None if cls.key is None else config.exchange.switch(cls.key)

    # --- what traders see -----------------------------------------------------------------
    @classmethod
    def fee_rate(cls, config: Config) -> float:
        """The fraction of a trade's value it charges each side under ``config`` (0: none);
        :func:`trading_fee` sums them into what traders see."""
        return 0.0

    # --- the exchange's events (defined by the mechanisms that use them) -------------------
    admit = None  # (acct: Account, order: Order, limit: int | None) -> str | None
    on_fill = None  # (fill: market.exchange.Fill) -> None
    end_tick = None  # () -> None

    # --- after the run --------------------------------------------------------------------
    def switched_on(self) -> bool:
        """Whether it is switched on in this run (outcomes' ``mechanisms``): installed and with
        something to act on."""
        return True

    def acted(self) -> bool:
        """Whether it acted in this run (outcomes' ``mechanisms_idle`` lists those that did
        not)."""
        raise NotImplementedError

    def activity(self) -> dict[str, int | float]:
        """Its activity counts, keys and order as :attr:`activity_labels`."""
        return {}

    def events(self) -> list[list[int]]:
        """Ticks at which it acted, each ``[tick, ...]`` (manifest ``mechanism_events``; the
        run figure marks them)."""
        return []



def trading_fee(config: Config) -> float:
    """The fraction of a trade's value each side pays under ``config``: the sum of the
    :meth:`Mechanism.fee_rate` of the mechanisms it installs (``MarketView.fee_rate``, the LLM
    prompt's fee)."""
    return sum(m.fee_rate(config) for m in MECHANISMS if m.installed(config))
