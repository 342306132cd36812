"""Hand-made run directories in the format of ``market_agents.sim.rundir`` (file names and
column types from there), for outcome and step tests."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import yaml

from market_agents.sim.rundir import CONFIG_FILE, MANIFEST_FILE, SCHEMAS, table_file

# The llm_decisions columns the outcome tests fill by hand (types from the run format).
LLM_DECISION_COLUMNS = {k: SCHEMAS["llm_decisions"][k] for k in (
    "tick", "slot", "valid", "error_class", "tokens_in", "tokens_out", "tokens_reasoning",
    "usd")}


def ticks_frame(prices: list[np.ndarray], values: list[np.ndarray],
                halted: np.ndarray | None = None) -> pl.DataFrame:
    rows = []
    for asset, (p, v) in enumerate(zip(prices, values, strict=True)):
        n = len(p)
        rows.append(pl.DataFrame({
            "tick": np.arange(n, dtype=np.int32), "asset": np.full(n, asset, dtype=np.int32),
            "last_price": p.astype(float), "mid_price": p.astype(float),
            "best_bid": p - 0.05, "best_ask": p + 0.05, "spread": np.full(n, 0.1),
            "fundamental": v.astype(float), "public_value": v.astype(float),
            "volume": np.full(n, 2, dtype=np.int64), "n_trades": np.ones(n, dtype=np.int32),
            "halted": halted if halted is not None else np.zeros(n, dtype=bool),
        }))
    return pl.concat(rows)


def _listed(x):
    return x if isinstance(x, list) else [x]


# the reasons a run of the built-in mechanisms records (manifest ``reject_reasons``)
REJECT_REASONS = ("invalid", "halted", "position_limit", "insufficient_funds")


def make_run(root: Path, prices, values=None, *, burn_in: int = 0, shocks=None, halts=None,
             orders: pl.DataFrame | None = None, trades: pl.DataFrame | None = None,
             agents: pl.DataFrame | None = None, decisions: pl.DataFrame | None = None,
             halted=None, manifest_extra=None, seed: int = 1) -> Path:
    prices = [np.asarray(p, dtype=float) for p in _listed(prices)]
    if values is None:
        values = [np.full(len(p), 100.0) for p in prices]
    values = [np.asarray(v, dtype=float) for v in _listed(values)]
    root.mkdir(parents=True, exist_ok=True)
    ticks_frame(prices, values, halted).write_parquet(root / table_file("ticks"))
    (trades if trades is not None else pl.DataFrame({
        "tick": [1, 2], "asset": [0, 0], "price": [100.0, 100.0], "qty": [3, 1],
        "buyer": [0, 1], "seller": [1, 0], "aggressor": [1, -1],
        "buyer_llm": [True, False], "seller_llm": [False, False]})).write_parquet(
        root / table_file("trades"))
    (orders if orders is not None else pl.DataFrame({
        "tick": [1, 1, 2, 3], "slot": [0, 1, 1, 0], "asset": [0, 0, 0, 0],
        "order_id": [1, 2, 3, 4], "kind": ["limit", "market", "cancel", "limit"],
        "side": [1, -1, 0, 1], "qty": [1, 1, 0, 1], "price": [100.0, None, None, 99.0],
        "status": ["accepted", "rejected", "accepted", "accepted"],
        "reason": [None, "position_limit", None, None],
        "is_llm": [True, False, False, False]})).write_parquet(root / table_file("orders"))
    n_assets = len(prices)
    (agents if agents is not None else pl.DataFrame({
        "slot": [0, 1, 2, 3], "type": ["llm", "market_maker", "noise", "trend"],
        "is_llm": [True, False, False, False], "cash": [1e4] * 4,
        "shares": [20, 20, 20, 20], "shares_1": [20] * 4 if n_assets == 2 else [None] * 4,
        "wealth": [1e4] * 4, "n_decisions": [2, 0, 5, 5]})).write_parquet(
        root / table_file("agents"))
    (decisions if decisions is not None else pl.DataFrame(
        schema=SCHEMAS["llm_decisions"])).write_parquet(root / table_file("llm_decisions"))
    manifest = {"config_hash": "abc123", "seed": seed, "shocks": shocks or [],
                "halts": halts or [], "n_rejects": 1, "reject_reasons": list(REJECT_REASONS),
                "activity": [], "mechanisms": [], "mechanisms_idle": [],
                **(manifest_extra or {})}
    (root / MANIFEST_FILE).write_text(json.dumps(manifest))
    (root / CONFIG_FILE).write_text(yaml.safe_dump({"simulation": {"burn_in": burn_in}}))
    return root


def bubble_crash_path() -> tuple[np.ndarray, np.ndarray]:
    """V = 100 flat; one 15-tick bubble at +6 % (ticks 100-114), a 5-tick blip at +6 % (ticks
    150-154, too short), and one crash: 100 -> 85 over ticks 200-205, staying at 85."""
    p = np.full(300, 100.0)
    p[100:115] = 106.0
    p[150:155] = 106.0
    p[200:206] = np.linspace(100.0, 85.0, 6)
    p[206:] = 85.0
    return p, np.full(300, 100.0)
