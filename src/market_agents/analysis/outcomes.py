"""Outcomes: the numbers the research reports, as a pure function of a run's saved files.

FROZEN: this file is hashed into the freeze. It reads nothing from disk; ``rundir.load_run``
turns a run directory into a :class:`RunFiles` and ``score(run, thresholds)`` does the science.

Conventions shared by every outcome below:
- P_t is the last trade price, carried forward (the mid price fills ticks before the first trade).
- V_t is the true fundamental (``fundamental``), never the public value the traders see.
- Market-quality and episode outcomes use ticks ``t >= burn_in``; counts of halts, rejects and
  LLM decisions use the whole run. With two assets a per-asset outcome is the mean over assets.

Outcome definitions (keys of ``score``):
- ``volatility``: sample SD (ddof 1) of one-tick log returns ln P_t - ln P_{t-1}.
- ``excess_kurtosis``: m4 / m2^2 - 3 of those returns (moment estimator).
- ``mispricing``: mean |P_t / V_t - 1|.
- ``premium``, ``premium_pub``: the signed mispricing, mean (P_t / V_t - 1), and the premium
  over what traders see, mean (P_t / V^pub_t - 1) (``public_value``): with |P/V - 1| they
  split a mispricing effect into premium removed and mispricing added.
- ``rad``, ``rd``: relative absolute deviation and relative deviation of Stöckl, Huber & Kirchler
  (2010): mean |P_t - V_t| / |mean V| and mean (P_t - V_t) / |mean V|.
- ``mean_spread``: mean best_ask - best_bid over ticks where both sides exist and the book is
  not crossed (a call auction's book crosses while orders wait for the next auction).
- ``volume``: shares traded; ``turnover``: volume / shares outstanding (summed agent holdings).
- ``n_bubbles``, ``bubble_share``: episodes of at least ``bubble_ticks`` consecutive ticks with
  P_t / V_t - 1 >= ``bubble_gap``; share = ticks inside such episodes / ticks.
- ``n_crashes``, ``crash_share``: a crash tick has P_t <= (1 - ``crash_drop``) * max(P over the
  previous ``crash_ticks`` ticks); an episode is a maximal run of crash ticks.
- ``shock_half_ticks``: for the first ``fundamental_jump`` shock (time s, size J): ticks
  k >= 0 until (P_{s+k} - P_pre) * sign(J) >= |J| / 2, P_pre = mean P over [s - 10, s); null if
  never (before the next shock or the end). ``shock_priced_share``:
  (mean P over (s+40, s+60] - P_pre) / J. Prices of asset 0.
- ``placebo_move``: for the first ``placebo`` shock at s, the move of the price relative to V
  (so V's own news does not count): mean(P/V) over (s+40, s+60] / mean(P/V) over [s-10, s) - 1.
- ``n_halts`` (manifest halts), ``halted_ticks`` (ticks with any asset halted), ``reject_ratio``
  (rejected / submitted limit and market orders; cancels excluded).
- ``ret_corr``: Pearson correlation of the two assets' log returns; ``spillover_dy``: Diebold &
  Yilmaz (2012) total spillover index (percent) from the generalized FEVD of a VAR(``var_order``)
  at horizon ``horizon``. Both null with one asset.
- ``llm_share_traders``: LLM agents / traders; ``llm_order_share``: LLM share of submitted limit
  and market orders; ``llm_volume_share``: LLM side of traded quantity,
  sum(qty * (buyer_llm + seller_llm)) / (2 * sum qty); ``n_llm_agents``, ``n_llm_decisions``,
  ``llm_decisions_per_agent``; ``llm_valid_rate``: valid / decisions that got an answer;
  ``llm_failure_rate``: decisions sent but never answered (call failed after retries) /
  decisions; ``llm_cached_hits``: answers served from the cache / answers (manifest: whether an
  answer came from the cache is a fact of this execution, not of the run, so it is not in the
  parquet files, which a replay reproduces byte for byte; 1.0 on a replay);
  ``llm_tokens_in``/``_out``/``_reasoning``; ``llm_usd``: priced cost of the recorded answers;
  ``llm_usd_spent``: USD this execution paid (manifest; 0 for cache hits and the mock);
  ``llm_budget_halts``: decisions a USD cap stopped; ``llm_budget_halt_events``: cap hits
  (manifest). LLM rates are null without LLM decisions.

Mechanism activity (did each mechanism act in this run?), counts over the whole run, as the
run recorded them in its manifest (each mechanism defines its own; docs/mechanisms.md):
- ``n_halts`` and ``halted_ticks`` (above); ``rejects_<reason>``: rejected orders by reason,
  for every reason the exchange may give (manifest ``reject_reasons``); each installed
  mechanism's counts and the LLM traders' (manifest ``activity``, e.g. ``margin_calls``,
  ``forced_sale_volume``, ``llm_channel_sent``, ``llm_channel_read``, ``llm_memory_lines``);
  ``llm_decision_cap_holds`` and ``llm_budget_halts``: decisions a decision cap or a USD cap
  stopped.
- ``mechanisms``: the mechanisms switched on in this run, comma-separated; ``mechanisms_idle``:
  those among them that never acted (manifest ``mechanisms`` and ``mechanisms_idle``).
- ``notes``: why a statistic is null when the run is too short for it (``key: reason``,
  separated by "; "), e.g. a two-asset run with fewer returns than its VAR needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

# error_class of a decision the LLM layer never sent: a USD cap stopped it, or a decision cap.
BLOCKED = ("budget_halt", "decision_cap")
MIN_RETURNS = {"volatility": 2, "excess_kurtosis": 4}
MIN_PAIRED_RETURNS = 3  # ret_corr (and so spillover_dy) of two assets


@dataclass(frozen=True)
class Thresholds:
    """Episode thresholds and spillover settings; defaults are the protocol's (§5.1)."""

    bubble_gap: float = 0.05
    bubble_ticks: int = 10
    crash_drop: float = 0.10
    crash_ticks: int = 20
    var_order: int = 1
    horizon: int = 10


@dataclass
class RunFiles:
    """A run's saved tables plus its manifest and resolved config (both as plain dicts)."""

    ticks: pl.DataFrame
    trades: pl.DataFrame
    orders: pl.DataFrame
    agents: pl.DataFrame
    llm_decisions: pl.DataFrame
    manifest: dict[str, Any]
    config: dict[str, Any] = field(default_factory=dict)


# --- price series -------------------------------------------------------------------------------


def price_paths(ticks: pl.DataFrame,
                burn_in: int) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
    """Per asset: (P, V, V^pub) over ticks >= burn_in, P carried forward (see module
    docstring); V^pub None for ticks saved without ``public_value``."""
    out = {}
    for asset in sorted(ticks["asset"].unique().to_list()):
        t = ticks.filter(pl.col("asset") == asset).sort("tick")
        p = t.select(
            pl.col("last_price").fill_null(strategy="forward").fill_null(pl.col("mid_price"))
        ).to_series()
        keep = (t["tick"] >= burn_in) & p.is_not_null()
        out[int(asset)] = (p.filter(keep).to_numpy().astype(float),
                           t["fundamental"].filter(keep).to_numpy().astype(float),
                           t["public_value"].filter(keep).to_numpy().astype(float)
                           if "public_value" in t.columns else None)
    return out


def log_returns(p: np.ndarray) -> np.ndarray:
    return np.diff(np.log(p)) if len(p) > 1 else np.zeros(0)


def excess_kurtosis(r: np.ndarray) -> float | None:
    if len(r) < 4:
        return None
    d = r - r.mean()
    m2 = float(np.mean(d**2))
    return None if m2 == 0 else float(np.mean(d**4) / m2**2 - 3.0)


def runs_of(mask: np.ndarray) -> list[tuple[int, int]]:
    """Maximal runs of True as (start, length)."""
    runs, start = [], None
    for i, m in enumerate(mask):
        if m and start is None:
            start = i
        elif not m and start is not None:
            runs.append((start, i - start))
            start = None
    if start is not None:
        runs.append((start, len(mask) - start))
    return runs


# A move exactly at a threshold counts, whatever the price level: compare ratios with a
# tolerance far below any economic difference, so rounding never decides an episode.
TOL = 1e-9


def bubbles(p: np.ndarray, v: np.ndarray, gap: float, min_ticks: int) -> tuple[int, float]:
    """(count, tick share) of episodes with P/V - 1 >= gap for >= min_ticks consecutive ticks."""
    if len(p) == 0:
        return 0, 0.0
    eps = [n for _, n in runs_of(p / v - 1.0 >= gap - TOL) if n >= min_ticks]
    return len(eps), sum(eps) / len(p)


def crashes(p: np.ndarray, drop: float, window: int) -> tuple[int, float]:
    """(count, tick share) of episodes with P >= drop below its max over the last window ticks."""
    if len(p) < 2:
        return 0, 0.0
    hit = np.zeros(len(p), dtype=bool)
    for t in range(1, len(p)):
        if p[t] / p[max(0, t - window):t].max() - 1.0 <= TOL - drop:
            hit[t] = True
    return len(runs_of(hit)), float(hit.mean())


# --- shocks -------------------------------------------------------------------------------------

PRE, POST_FROM, POST_TO = 10, 40, 60


def shock_response(p: np.ndarray, v: np.ndarray, ticks: np.ndarray, time: int, size: float,
                   until: int) -> dict[str, float | int | None]:
    """Half-pricing time, priced share and P/V move around a shock at ``time`` (see docstring)."""
    pre_m = (ticks >= time - PRE) & (ticks < time)
    post_m = (ticks > time + POST_FROM) & (ticks <= time + POST_TO)
    if not pre_m.any():
        return {"half_ticks": None, "priced_share": None, "move": None}
    base = float(p[pre_m].mean())
    half = None
    if size != 0:
        after = (ticks >= time) & (ticks < until)
        hits = np.nonzero((p[after] - base) * np.sign(size) >= abs(size) / 2)[0]
        half = int(ticks[after][hits[0]] - time) if len(hits) else None
    if not post_m.any():
        return {"half_ticks": half, "priced_share": None, "move": None}
    ratio = p / v
    return {
        "half_ticks": half,
        "priced_share": (float(p[post_m].mean()) - base) / size if size else None,
        "move": float(ratio[post_m].mean() / ratio[pre_m].mean()) - 1.0,
    }


def shocks_outcomes(ticks: pl.DataFrame, shocks: list[dict[str, Any]],
                    notes: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"shock_half_ticks": None, "shock_priced_share": None,
                           "placebo_move": None}
    if not shocks or ticks.height == 0:
        return out
    t = ticks.filter(pl.col("asset") == 0).sort("tick")
    p = t.select(pl.col("last_price").fill_null(strategy="forward")
                 .fill_null(pl.col("mid_price"))).to_series()
    keep = p.is_not_null()
    tk, pv = t["tick"].filter(keep).to_numpy(), p.filter(keep).to_numpy().astype(float)
    vv = t["fundamental"].filter(keep).to_numpy().astype(float)
    times = sorted(int(s["time"]) for s in shocks)
    for kind in ("fundamental_jump", "placebo"):
        first = next((s for s in sorted(shocks, key=lambda s: s["time"])
                      if s["kind"] == kind), None)
        if first is None:
            continue
        s_time = int(first["time"])
        until = next((x for x in times if x > s_time), int(tk.max()) + 1 if len(tk) else s_time)
        r = shock_response(pv, vv, tk, s_time, float(first.get("size") or 0.0), until)
        names = "shock_half_ticks, shock_priced_share" if kind == "fundamental_jump" else (
            "placebo_move")
        if not ((tk >= s_time - PRE) & (tk < s_time)).any():
            notes.append(f"{names}: no tick in [{s_time - PRE}, {s_time})")
        elif not ((tk > s_time + POST_FROM) & (tk <= s_time + POST_TO)).any():
            late = "shock_priced_share" if kind == "fundamental_jump" else names
            notes.append(f"{late}: the run ends before ({s_time + POST_FROM}, "
                         f"{s_time + POST_TO}]")
        if kind == "fundamental_jump":
            out["shock_half_ticks"], out["shock_priced_share"] = r["half_ticks"], r["priced_share"]
        else:
            out["placebo_move"] = r["move"]
    return out


# --- two assets ---------------------------------------------------------------------------------


def spillover_dy(x: np.ndarray, p: int = 1, horizon: int = 10) -> float:
    """Diebold-Yilmaz (2012) total spillover (percent) of the columns of ``x`` (T x N).

    VAR(p) with a constant by OLS; generalized FEVD (Pesaran & Shin 1998):
    theta_ij = s_jj^-1 sum_h (e_i' A_h S e_j)^2 / sum_h (e_i' A_h S A_h' e_i), h = 0..H-1,
    rows normalized to 1; index = 100 * sum_{i != j} theta_ij / N.
    """
    x = np.asarray(x, dtype=float)
    n_obs, n = x.shape
    if n_obs < var_min_obs(n, p):
        raise ValueError(f"spillover_dy: {n_obs} observations are too few for a VAR({p}) "
                         f"(needs {var_min_obs(n, p)})")
    y = x[p:]
    lags = np.hstack([x[p - k - 1:n_obs - k - 1] for k in range(p)])
    z = np.hstack([np.ones((len(y), 1)), lags])
    beta, *_ = np.linalg.lstsq(z, y, rcond=None)
    resid = y - z @ beta
    sigma = resid.T @ resid / (len(y) - z.shape[1])
    coefs = [beta[1 + k * n:1 + (k + 1) * n].T for k in range(p)]  # A_k: y_t = sum A_k y_{t-k}
    ma = [np.eye(n)]
    for h in range(1, horizon):
        ma.append(sum(coefs[k] @ ma[h - k - 1] for k in range(min(p, h))))
    num = sum((a @ sigma) ** 2 for a in ma) / np.diag(sigma)[None, :]
    den = sum(np.diag(a @ sigma @ a.T) for a in ma)[:, None]
    theta = num / den
    theta = theta / theta.sum(axis=1, keepdims=True)
    return float(100.0 * (theta.sum() - np.trace(theta)) / n)


def var_min_obs(n: int, p: int) -> int:
    """Observations a VAR(p) of n variables with a constant needs for one residual degree of
    freedom: T - p > 1 + n p."""
    return p * (n + 1) + 2


# --- the score ----------------------------------------------------------------------------------


def _mean(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None and np.isfinite(v)]
    return float(np.mean(vals)) if vals else None


SENSITIVITY_BUBBLE_GAPS = (0.03, 0.05, 0.08)  # protocol §5.1 sensitivity grid
SENSITIVITY_CRASH_DROPS = (0.07, 0.10, 0.15)
EPISODE_KEYS = ("n_bubbles", "bubble_share", "n_crashes", "crash_share")


def burn_in_of(run: RunFiles) -> int:
    return int((run.config.get("simulation") or {}).get("burn_in", 0))


def episode_outcomes(run: RunFiles, th: Thresholds) -> dict[str, Any]:
    """Bubble and crash episodes, summed (counts) or averaged (shares) over assets."""
    nb = nc = 0
    bshare, cshare = [], []
    for p, v, _ in price_paths(run.ticks, burn_in_of(run)).values():
        b, bs = bubbles(p, v, th.bubble_gap, th.bubble_ticks)
        c, cs = crashes(p, th.crash_drop, th.crash_ticks)
        nb, nc = nb + b, nc + c
        bshare.append(bs)
        cshare.append(cs)
    return {"n_bubbles": nb, "bubble_share": _mean(bshare) or 0.0,
            "n_crashes": nc, "crash_share": _mean(cshare) or 0.0}


def market_outcomes(run: RunFiles, th: Thresholds, notes: list[str]) -> dict[str, Any]:
    burn_in = burn_in_of(run)
    paths = price_paths(run.ticks, burn_in)
    n_ret = min((max(len(p) - 1, 0) for p, *_ in paths.values()), default=0)
    for key, need in MIN_RETURNS.items():
        if n_ret < need:
            notes.append(f"{key}: {n_ret} returns after burn-in, needs {need}")
    if len(paths) == 2 and n_ret < MIN_PAIRED_RETURNS:
        notes.append(f"ret_corr, spillover_dy: {n_ret} returns after burn-in, "
                     f"needs {MIN_PAIRED_RETURNS}")
    if not any(len(p) for p, *_ in paths.values()):
        notes.append("mispricing, rad, rd: no tick after burn-in")
    per: dict[str, list] = {k: [] for k in ("vol", "kurt", "mis", "rad", "rd", "prem", "pub")}
    for p, v, pub in paths.values():
        r = log_returns(p)
        per["vol"].append(float(np.std(r, ddof=1)) if len(r) > 1 else None)
        per["kurt"].append(excess_kurtosis(r))
        per["mis"].append(float(np.mean(np.abs(p / v - 1.0))) if len(p) else None)
        per["prem"].append(float(np.mean(p / v - 1.0)) if len(p) else None)
        per["pub"].append(float(np.mean(p / pub - 1.0)) if len(p) and pub is not None else None)
        scale = abs(float(np.mean(v))) if len(v) else 0.0
        per["rad"].append(float(np.mean(np.abs(p - v))) / scale if scale else None)
        per["rd"].append(float(np.mean(p - v)) / scale if scale else None)
    post = run.ticks.filter(pl.col("tick") >= burn_in)
    spread = post.filter(pl.col("spread") >= 0)["spread"]
    volume = int(post["volume"].sum()) if post.height else 0
    held = float(run.agents["shares"].sum()) if run.agents.height else 0.0
    if "shares_1" in run.agents.columns and run.agents["shares_1"].null_count() < run.agents.height:
        held += float(run.agents["shares_1"].sum())
    out = {
        "volatility": _mean(per["vol"]), "excess_kurtosis": _mean(per["kurt"]),
        "mispricing": _mean(per["mis"]), "premium": _mean(per["prem"]),
        "premium_pub": _mean(per["pub"]), "rad": _mean(per["rad"]), "rd": _mean(per["rd"]),
        "mean_spread": float(spread.mean()) if len(spread) else None,
        "volume": volume, "turnover": volume / held if held > 0 else None,
        **episode_outcomes(run, th),
        "ret_corr": None, "spillover_dy": None,
    }
    if out["excess_kurtosis"] is None and n_ret >= MIN_RETURNS["excess_kurtosis"]:
        notes.append("excess_kurtosis: the price never moves after burn-in")
    if len(paths) == 2 and n_ret >= MIN_PAIRED_RETURNS:
        (p0, *_), (p1, *_) = paths.values()
        m = min(len(p0), len(p1))
        rets = np.column_stack([log_returns(p0[len(p0) - m:]), log_returns(p1[len(p1) - m:])])
        need = var_min_obs(2, th.var_order)
        if rets.std(axis=0).min() == 0:
            notes.append("ret_corr, spillover_dy: an asset's price never moves after burn-in")
        elif len(rets) < need:
            out["ret_corr"] = float(np.corrcoef(rets.T)[0, 1])
            notes.append(f"spillover_dy: {len(rets)} returns after burn-in are too few for a "
                         f"VAR({th.var_order}) (needs {need})")
        else:
            out["ret_corr"] = float(np.corrcoef(rets.T)[0, 1])
            out["spillover_dy"] = spillover_dy(rets, th.var_order, th.horizon)
            if not np.isfinite(out["spillover_dy"]):
                out["spillover_dy"] = None
                notes.append("spillover_dy: singular residual covariance")
    return out


def exchange_outcomes(run: RunFiles) -> dict[str, Any]:
    orders = run.orders.filter(pl.col("kind") != "cancel")
    rejected = orders.filter(pl.col("status") == "rejected").height
    halted = run.ticks.filter(pl.col("halted"))["tick"].n_unique() if run.ticks.height else 0
    return {
        "n_halts": len(run.manifest.get("halts") or []),
        "halted_ticks": int(halted),
        "reject_ratio": rejected / orders.height if orders.height else None,
    }


def llm_outcomes(run: RunFiles) -> dict[str, Any]:
    agents, orders, trades, dec = run.agents, run.orders, run.trades, run.llm_decisions
    n_llm = int(agents["is_llm"].sum()) if agents.height else 0
    subm = orders.filter(pl.col("kind") != "cancel")
    qty = float(trades["qty"].sum()) if trades.height else 0.0
    llm_qty = (float((trades["qty"] * (trades["buyer_llm"].cast(pl.Int64)
                                       + trades["seller_llm"].cast(pl.Int64))).sum())
               if trades.height else 0.0)
    n_dec = dec.height
    usage = run.manifest.get("llm_usage") or {}
    out: dict[str, Any] = {
        "llm_share_traders": n_llm / agents.height if agents.height else None,
        "llm_order_share": float(subm["is_llm"].mean()) if subm.height else None,
        "llm_volume_share": llm_qty / (2 * qty) if qty > 0 else None,
        "n_llm_agents": n_llm, "n_llm_decisions": n_dec,
        "llm_decisions_per_agent": n_dec / n_llm if n_llm else None,
        "llm_valid_rate": None, "llm_failure_rate": None, "llm_cached_hits": None,
        "llm_tokens_in": 0, "llm_tokens_out": 0, "llm_tokens_reasoning": 0, "llm_usd": 0.0,
        "llm_usd_spent": float(usage.get("usd_spent") or 0.0),
        "llm_budget_halts": 0, "llm_budget_halt_events": len(usage.get("budget_halt_events") or []),
        "llm_decision_cap_holds": 0,
    }
    if n_dec:
        err = dec["error_class"].fill_null("")
        sent = ~err.is_in(list(BLOCKED))
        failed = sent & dec["valid"].is_null()
        out.update({
            "llm_valid_rate": float(dec["valid"].mean()) if dec["valid"].null_count() < n_dec
            else None,
            "llm_failure_rate": float(failed.mean()),
            "llm_cached_hits": float(usage.get("cached_hits") or 0.0) if sent.any() else None,
            "llm_budget_halts": int((err == "budget_halt").sum()),
            "llm_decision_cap_holds": int((err == "decision_cap").sum()),
            "llm_tokens_in": int(dec["tokens_in"].sum()),
            "llm_tokens_out": int(dec["tokens_out"].sum()),
            "llm_tokens_reasoning": int(dec["tokens_reasoning"].sum()),
            "llm_usd": float(dec["usd"].sum()),
        })
    return out


def activity_outcomes(run: RunFiles) -> dict[str, Any]:
    """Rejects by reason and the manifest's activity counts (see module docstring)."""
    reasons = run.orders.filter(pl.col("status") == "rejected")["reason"].to_list()
    out: dict[str, Any] = {f"rejects_{r}": reasons.count(r)
                           for r in run.manifest["reject_reasons"]}
    return {**out, **dict(run.manifest["activity"])}


def mechanisms(manifest: dict[str, Any]) -> dict[str, str]:
    """The mechanisms switched on and those among them that never acted (comma-separated)."""
    return {"mechanisms": ",".join(manifest["mechanisms"]),
            "mechanisms_idle": ",".join(manifest["mechanisms_idle"])}


def score(run: RunFiles, th: Thresholds | None = None) -> dict[str, Any]:
    """Every outcome of one run (definitions in the module docstring)."""
    th = th or Thresholds()
    shocks = run.manifest.get("shocks")
    if shocks is None:
        shocks = run.config.get("shocks") or []
    notes: list[str] = []
    out = {**market_outcomes(run, th, notes), **shocks_outcomes(run.ticks, shocks, notes),
           **exchange_outcomes(run), **llm_outcomes(run), **activity_outcomes(run)}
    return {**out, **mechanisms(run.manifest), "notes": "; ".join(notes)}
