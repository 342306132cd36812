"""The realism report: the stylized facts of a market over seeds, each against its target.

:func:`run_facts` measures one price path (the measures are in
:mod:`market_agents.analysis.realism`); :func:`report` summarises a block of seeds and judges
it. The targets, and the horizon each is judged at:

- at the protocol's horizon (runs of at most ``SHORT_HORIZON`` ticks, the runs the study
  makes): the Ljung–Box test on lags 1–10 rejects at 5 % in at most 10 % of seeds, and so does
  its heteroskedasticity-robust version (Ljung–Box over-rejects an unpredictable series whose
  volatility clusters: :func:`realism.robust_portmanteau`); the median
  acf of returns at every lag 1–20 lies inside the white-noise band; median excess kurtosis of
  1-tick returns above 3; median Hill tail index between 2 and 5 (Cont 2001, facts 1, 2); the
  median over seeds of the mean raw acf(|r|) over lags 1–10 at least 0.05 (volatility
  clustering at short lags, Cont 2001 fact 8; issue 35).
  At long horizons these are reported, not judged: on 20,000 ticks the band is ±0.014 and any
  market with a microstructure fails it, real ones included;
- at long horizons (at least ``LONG_HORIZON`` ticks): the median raw acf(|r|) at lag 50 at
  least 0.03 and its mean over lags 20–100 at least 0.02 (clustering that lasts), median
  excess kurtosis of 20-tick returns above 1 (slow aggregational Gaussianity, fact 4), and no
  house premium: |mean over seeds of P/V^pub − 1| at most 0.05 %, positive in at most 70 % of
  the seeds (a long run averages the premium's noise away; at 600 ticks it is reported);
- at every horizon, in every seed: no episode of |P/V^pub − 1| > 5 % longer than 50 ticks
  outside the 50 ticks after each scheduled shock; at most 0.25 % of ticks beyond 5 % of V on
  which V^pub is within 5 % of V (what the market adds to its value null,
  :func:`realism.value_null_excess`); every trader type's mean holding of shares at least
  25 % of its start on every tick after the burn-in (issues 23 and 35: the classical control
  must stay a market at any horizon, DESIGN principle 11).

The share of ticks beyond 5 % of V itself, and the deseasonalised acf(|r|), are reported, not
judged: V's hidden jumps put a market priced at V^pub on every tick beyond 5 % of V on more
than 1 % of the ticks in about half of all 20-seed blocks (issue 35).

Returns are one-tick log changes of the mid price after the burn-in, every tick (a tick whose
mid did not move is a zero return: regular sampling, as the tests assume).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from market_agents.analysis import realism
from market_agents.config import Config
from market_agents.sim.simulation import opening_account

SHORT_HORIZON = 1_000  # ticks: runs up to this long are judged on predictability and tails
LONG_HORIZON = 5_000  # ticks: runs at least this long are judged on clustering and aggregation
ACF_LAGS = 20
ABS_ACF_LAGS = 100
LJUNG_BOX_LAGS = 10
SHOCK_WINDOW = 50  # ticks after a scheduled shock left out of the mispricing checks
GAP = 0.05  # |P/V - 1| that counts as away from value
HOLDING_FLOOR = 0.10  # reported: a type's average holding below this share of its start ...
HOLDING_TICKS = 0.01  # ... for more than this share of the ticks
HOLDING_MIN = 0.25  # judged: no type's average shares below this share of its start, ever
PREMIUM_MAX = 0.0005  # |mean of P/V^pub - 1| over seeds: no house premium beyond 0.05 % ...
PREMIUM_POSITIVE = 0.70  # ... and positive in at most this share of seeds (14 of 20)
PUBLIC_EPISODE_MAX = 50  # ticks: the longest episode beyond 5 % of V^pub
VALUE_NULL_EXCESS = 0.0025  # share of ticks beyond 5 % of V where V^pub is within 5 % of V


@dataclass(frozen=True)
class Target:
    """One judged fact: its name, what it says, and at which horizons it is judged."""

    name: str
    text: str
    horizon: str  # "short", "long" or "any"


TARGETS: tuple[Target, ...] = (
    Target("ljung_box_reject_share", "Ljung-Box lags 1-10 rejects at 5 % in <= 10 % of seeds",
           "short"),
    Target("robust_portmanteau_reject_share", "heteroskedasticity-robust portmanteau (Escanciano "
           "& Lobato 2009) lags 1-10 rejects at 5 % in <= 10 % of seeds", "short"),
    Target("acf_within_band", "median acf of returns at every lag 1-20 inside the white-noise "
           "band", "short"),
    Target("excess_kurtosis_1", "median excess kurtosis of 1-tick returns > 3", "short"),
    Target("hill_tail_index", "median Hill tail index (top 5 % of |r|) in 2 .. 5", "short"),
    Target("raw_abs_acf_1_10", "median over seeds of the mean acf(|r|) over lags 1-10 (raw, "
           "unchanged prices dropped) >= 0.05", "short"),
    Target("raw_abs_acf_50", "median acf(|r|) at lag 50 (raw) >= 0.03", "long"),
    Target("raw_abs_acf_20_100", "median of the mean acf(|r|) over lags 20-100 (raw) >= 0.02",
           "long"),
    Target("excess_kurtosis_20", "median excess kurtosis of 20-tick returns > 1", "long"),
    Target("premium", "|mean of P/V^pub - 1| <= 0.05 % and positive in <= 70 % of seeds (no "
           "house premium)", "long"),
    Target("public_longest_mispricing", "in every seed no episode of |P/V^pub - 1| > 5 % longer "
           "than 50 ticks (outside the 50 ticks after a shock)", "any"),
    Target("value_null_excess", "in every seed <= 0.25 % of ticks beyond 5 % of V where V^pub "
           "is within 5 % of V (what the market adds to what it cannot know)", "any"),
    Target("holdings_min", "in every seed every type's mean holding of shares >= 25 % of its "
           "start on every tick after the burn-in", "any"),
)


def judged(target: Target, ticks: int) -> bool:
    """Whether ``target`` is judged on runs of ``ticks`` ticks (else reported only)."""
    return (target.horizon == "any" or (target.horizon == "short" and ticks <= SHORT_HORIZON)
            or (target.horizon == "long" and ticks >= LONG_HORIZON))


def holdings_of_run(config: Config, tables: dict[str, Any], asset: int = 0
                    ) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, dict[str, float]]]:
    """Each trader type's mean holdings of ``asset`` and cash per tick, rebuilt from a run's
    trade log, and each type's mean opening holding.

    Args:
        config: the run's config (the opening accounts: ``sim.simulation.opening_account``).
        tables: the run's tables (``simulate``'s ``agents``, ``trades`` and ``ticks``).
        asset: which asset's shares.

    Returns:
        ``(holdings, starts)``: type -> ``{"shares", "cash"}``, per tick (shape ``(ticks,)``,
        from :func:`realism.holdings_by_type`) and at the opening (floats).
    """
    agents, trades = tables["agents"], tables["trades"]
    trades = trades.filter(trades["asset"] == asset)
    slots = agents["slot"].to_list()
    types = dict(zip(slots, agents["type"].to_list(), strict=True))
    opening = {s: opening_account(config, types[s], llm)
               for s, llm in zip(slots, agents["is_llm"].to_list(), strict=True)}
    n_ticks = int((tables["ticks"]["asset"] == asset).sum())
    held = realism.holdings_by_type(
        n_ticks, trades["tick"].to_numpy(), trades["price"].to_numpy(), trades["qty"].to_numpy(),
        trades["buyer"].to_numpy(), trades["seller"].to_numpy(), types,
        {s: o.cash for s, o in opening.items()}, {s: o.shares for s, o in opening.items()})
    starts = {}
    for kind in held:
        members = [opening[s] for s in slots if types[s] == kind]
        starts[kind] = {"cash": sum(o.cash for o in members) / len(members),
                        "shares": sum(o.shares for o in members) / len(members)}
    return held, starts


def run_facts(mid: np.ndarray, value: np.ndarray, volume: np.ndarray, burn_in: int,
              shock_times: list[int], holdings: dict[str, dict[str, np.ndarray]] | None = None,
              starts: dict[str, dict[str, float]] | None = None,
              public: np.ndarray | None = None, season: int = 1) -> dict[str, Any]:
    """The realism measures of one run.

    Args:
        mid: the mid price per tick, shape ``(ticks,)`` (currency units).
        value: the true value V per tick, same shape.
        volume: shares traded per tick, same shape.
        burn_in: ticks left out at the start (the run's ``simulation.burn_in``).
        shock_times: the ticks of the scheduled shocks (their next ``SHOCK_WINDOW`` ticks are
            left out of the mispricing share and episodes).
        holdings: type -> ``{"shares", "cash"}`` mean holding per tick (from
            :func:`realism.holdings_by_type`), or None (a market without a trade log by type).
        starts: type -> ``{"shares", "cash"}`` mean opening holding, with ``holdings``.
        public: the public value V^pub per tick, same shape as ``mid``, or None: the gap of
            the price to what traders can know (V^pub lags V by up to a news interval, so a
            large hidden jump is a gap to V that no trader could close).
        season: the market's calendar period in ticks (news releases and the traders'
            decision cohorts; ``ma validate`` uses lcm(news_interval, decision_interval)):
            |r| is divided by its mean at each phase of it before its acf, so the calendar
            does not pass for clustering at lags that are multiples of it.

    Returns:
        A dict of floats and arrays: ``acf`` (lags 1..20), ``abs_acf`` (lags 1..100, of the
        deseasonalized |r|), ``raw_abs_acf`` (lags 1..100, of |r| as it is, the ticks whose
        mid did not move dropped), ``ljung_box_p`` and ``robust_portmanteau_p`` (lags 1..10),
        ``kurtosis`` (scale -> excess kurtosis), ``hill``, ``hill_se``,
        ``volume_volatility``, ``decay_beta`` (power-law exponent of acf(|r|)),
        ``mispricing`` (dict of :func:`realism.mispricing`), ``public_mispricing`` (the same
        against V^pub; None without ``public``), ``mispricing_path`` (|P/V − 1|
        per tick after the burn-in), ``holdings_low`` (type -> worst share of ticks below the
        floor, shares or cash), ``holdings_lowest`` (type -> its lowest mean holding of shares
        after the burn-in as a share of its start), ``n`` (returns); with ``public`` also
        ``premium`` (:func:`realism.premium`), ``value_null_excess``
        (:func:`realism.value_null_excess`),
        ``news_variance_share``, ``calendar_null_ljung_box_p`` and ``calendar_null_hill``
        (references: :func:`realism.calendar_null`) and ``value_null_mispricing`` (the
        :func:`realism.mispricing` of V^pub itself against V).
    """
    p, v = mid[burn_in:], value[burn_in:]
    log_p = np.log(p)
    r = np.diff(log_p)
    ab = np.abs(r)
    # The return at index i is the change into tick burn_in + 1 + i.
    abs_acf = realism.acf_many(realism.deseasonalize(ab, season, burn_in + 1), ABS_ACF_LAGS)
    hill, hill_se = realism.hill(ab)
    reference = {}
    if public is not None:
        # The calendar null (realism.calendar_null): a reference for the portmanteau tests,
        # drawn from the run's own returns so the same run gives the same figure.
        news = np.diff(np.log(public[burn_in:]))
        release = news != 0
        rng = np.random.default_rng(np.frombuffer(r.tobytes(), dtype=np.uint32)
                                    if len(r) else 0)
        null = realism.calendar_null(r, release, news, rng)
        reference = {"news_variance_share": realism.news_variance_share(r, release),
                     "calendar_null_ljung_box_p": realism.ljung_box(null, LJUNG_BOX_LAGS)[1],
                     "calendar_null_hill": realism.hill(np.abs(null))[0]}
    excluded = realism.after_shocks(len(mid), shock_times, SHOCK_WINDOW)[burn_in:]
    if public is not None:
        # The value null: a market priced at V^pub on every tick, the best any market whose
        # traders see V^pub only can do against V (hidden jumps wait for the next release).
        reference["value_null_mispricing"] = realism.mispricing(public[burn_in:], v, excluded,
                                                                GAP)
    low: dict[str, float] = {}
    lowest: dict[str, float] = {}  # type -> its lowest mean shares after the burn-in / start
    for kind, series in (holdings or {}).items():
        start = (starts or {})[kind]
        low[kind] = max(realism.share_below(series[k][burn_in:], start[k], HOLDING_FLOOR)
                        for k in ("shares", "cash"))
        if start["shares"] > 0:
            lowest[kind] = float(series["shares"][burn_in:].min() / start["shares"])
    if public is not None:
        reference["premium"] = realism.premium(p, public[burn_in:])
        reference["value_null_excess"] = realism.value_null_excess(p, v, public[burn_in:],
                                                                   excluded, GAP)
    return {
        "n": len(r),
        "acf": realism.acf_many(r, ACF_LAGS),
        "abs_acf": abs_acf,
        "raw_abs_acf": realism.acf_many(ab[ab > 0], ABS_ACF_LAGS),
        "ljung_box_p": realism.ljung_box(r, LJUNG_BOX_LAGS)[1],
        "robust_portmanteau_p": realism.robust_portmanteau(r, LJUNG_BOX_LAGS)[1],
        "kurtosis": realism.kurtosis_by_scale(log_p),
        "hill": hill, "hill_se": hill_se,
        "volume_volatility": realism.volume_volatility(volume[burn_in + 1:], ab),
        "decay_beta": realism.power_law_decay(abs_acf)[0],
        "mispricing": realism.mispricing(p, v, excluded, GAP),
        "public_mispricing": None if public is None else realism.mispricing(
            p, public[burn_in:], excluded, GAP),
        "mispricing_path": np.abs(p / v - 1.0),
        "holdings_low": low,
        "holdings_lowest": lowest,
        **reference,
    }


def median_or_nan(xs: list[float]) -> float:
    """The median of the non-NaN values of ``xs`` (NaN, without a warning, when none is)."""
    a = np.asarray(xs, dtype=float)
    a = a[~np.isnan(a)]
    return float(np.median(a)) if len(a) else float("nan")


def report(rows: list[dict[str, Any]], ticks: int) -> dict[str, Any]:
    """Summarise one block of seeds (rows of :func:`run_facts`) and judge it.

    Args:
        rows: one :func:`run_facts` dict per seed (at least one).
        ticks: the runs' length, which decides which targets are judged (:func:`judged`).

    Returns:
        ``{"values": name -> float, "checks": name -> {"value", "ok", "judged", "text"}}``:
        the block's summary figures (medians over seeds unless the name says otherwise) and
        each target's verdict (``ok`` None where it is not judged at this horizon).
    """
    med = median_or_nan
    n = int(np.median([r["n"] for r in rows]))
    band = realism.white_noise_band(n)
    acf_med = np.median([r["acf"] for r in rows], axis=0)
    abs_med = np.median([r["abs_acf"] for r in rows], axis=0)
    kinds = sorted({k for r in rows for k in r["holdings_low"]})
    owners = sorted({k for r in rows for k in r["holdings_lowest"]})  # types that hold shares
    values: dict[str, float] = {
        "returns_per_seed": float(n),
        "white_noise_band": band,
        "ljung_box_reject_share": float(np.mean([r["ljung_box_p"] < 0.05 for r in rows])),
        "robust_portmanteau_reject_share": float(np.mean([r["robust_portmanteau_p"] < 0.05
                                                          for r in rows])),
        "max_abs_median_acf_1_20": float(np.max(np.abs(acf_med))),
        **{f"median_acf_{k}": float(acf_med[k - 1]) for k in (1, 2, 3, 5, 10, 20)},
        **{f"excess_kurtosis_{s}": med([r["kurtosis"][s] for r in rows])
           for s in realism.AGGREGATION_SCALES},
        "hill_tail_index": med([r["hill"] for r in rows]),
        "hill_se": med([r["hill_se"] for r in rows]),
        **{f"abs_acf_{k}": float(abs_med[k - 1]) for k in (1, 10, 50, 100)},
        **{f"raw_abs_acf_{k}": med([r["raw_abs_acf"][k - 1] for r in rows]) for k in (1, 10, 50)},
        "raw_abs_acf_1_10": med([float(np.mean(r["raw_abs_acf"][:10])) for r in rows]),
        "raw_abs_acf_20_100": med([float(np.mean(r["raw_abs_acf"][19:100])) for r in rows]),
        "abs_acf_decay_beta": med([r["decay_beta"] for r in rows]),
        "volume_volatility_corr": med([r["volume_volatility"] for r in rows]),
        "mispricing_q50": med([r["mispricing"]["q50"] for r in rows]),
        "mispricing_q99": med([r["mispricing"]["q99"] for r in rows]),
        "mispricing_max": float(max(r["mispricing"]["max"] for r in rows)),
        "mispriced_share_worst": float(max(r["mispricing"]["share_beyond"] for r in rows)),
        "longest_mispricing_worst": float(max(r["mispricing"]["longest_episode"]
                                              for r in rows)),
        **({"public_mispriced_share_worst": float(max(r["public_mispricing"]["share_beyond"]
                                                      for r in rows)),
            "public_longest_mispricing_worst": float(max(
                r["public_mispricing"]["longest_episode"] for r in rows))}
           if all(r.get("public_mispricing") for r in rows) else {}),
        **{f"holdings_low_{k}_worst": float(max(r["holdings_low"].get(k, 0.0) for r in rows))
           for k in kinds},
        # each type's lowest mean holding of shares after the burn-in, share of its start
        **{f"holdings_lowest_{k}": float(min(r["holdings_lowest"][k] for r in rows
                                             if k in r["holdings_lowest"])) for k in owners},
        **({"premium_mean": float(np.mean([r["premium"] for r in rows])),
            "premium_positive_share": float(np.mean([r["premium"] > 0 for r in rows])),
            "value_null_excess_worst": float(max(r["value_null_excess"] for r in rows))}
           if all("premium" in r for r in rows) else {}),
        # references, not targets (realism.calendar_null): where the news calendar alone
        # puts the Ljung-Box rejection rate for this market's trading variance
        **({"news_variance_share": med([r["news_variance_share"] for r in rows]),
            "calendar_null_ljung_box_reject_share": float(np.mean(
                [r["calendar_null_ljung_box_p"] < 0.05 for r in rows])),
            "calendar_null_hill_tail_index": med([r["calendar_null_hill"] for r in rows]),
            # the share of ticks beyond 5 % of V in the worst seed of a market priced at V^pub
            "value_null_mispriced_share_worst": float(max(
                r["value_null_mispricing"]["share_beyond"] for r in rows))}
           if all("news_variance_share" in r for r in rows) else {}),
    }
    lowest = min((values[f"holdings_lowest_{k}"] for k in owners), default=None)

    def at_most(key: str, bound: float) -> tuple[float | None, bool]:
        # None: the market has no measure of it (PAMS's run has no V^pub), so not judged
        value = values.get(key)
        return value, value is not None and value <= bound

    results = {
        "ljung_box_reject_share": (values["ljung_box_reject_share"],
                                   values["ljung_box_reject_share"] <= 0.10),
        "robust_portmanteau_reject_share": (values["robust_portmanteau_reject_share"],
                                            values["robust_portmanteau_reject_share"] <= 0.10),
        "acf_within_band": (values["max_abs_median_acf_1_20"],
                            values["max_abs_median_acf_1_20"] < band),
        "excess_kurtosis_1": (values["excess_kurtosis_1"], values["excess_kurtosis_1"] > 3),
        "hill_tail_index": (values["hill_tail_index"], 2 < values["hill_tail_index"] < 5),
        "raw_abs_acf_1_10": (values["raw_abs_acf_1_10"], values["raw_abs_acf_1_10"] >= 0.05),
        "raw_abs_acf_50": (values["raw_abs_acf_50"], values["raw_abs_acf_50"] >= 0.03),
        "raw_abs_acf_20_100": (values["raw_abs_acf_20_100"],
                               values["raw_abs_acf_20_100"] >= 0.02),
        "excess_kurtosis_20": (values["excess_kurtosis_20"], values["excess_kurtosis_20"] > 1),
        "premium": (values.get("premium_mean"), "premium_mean" in values
                    and abs(values["premium_mean"]) <= PREMIUM_MAX
                    and values["premium_positive_share"] <= PREMIUM_POSITIVE),
        "public_longest_mispricing": at_most("public_longest_mispricing_worst",
                                             PUBLIC_EPISODE_MAX),
        "value_null_excess": at_most("value_null_excess_worst", VALUE_NULL_EXCESS),
        "holdings_min": (lowest, lowest is not None and lowest >= HOLDING_MIN),
    }
    checks = {}
    for t in TARGETS:
        value, ok = results[t.name]
        # Not judged where the market has no measure of it (value None): PAMS's trade log
        # names no trader types and its run has no V^pub.
        on = judged(t, ticks) and value is not None
        checks[t.name] = {"value": value, "ok": bool(ok) if on else None, "judged": on,
                          "text": t.text}
    return {"values": values, "checks": checks}


def misses(summary: dict[str, Any]) -> list[str]:
    """The names of the judged targets a block of :func:`report` missed."""
    return [name for name, c in summary["checks"].items() if c["ok"] is False]
