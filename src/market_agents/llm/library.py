"""The frozen decision library (protocol §5.4): recorded LLM decisions replayed by nearest
neighbour, so a market of any size can be populated with "LLM-like" traders at no cost.

Built from a response cache (the cache is the record): every answered market request of one
model, single-asset, without memory or channel sections. Each entry keeps the features of the
snapshot the model saw and what it decided (action, quantity, market or limit, the limit as an
offset from mid). A query is matched on standardized features; the distance is reported so a
replay far from the recorded states can be flagged out-of-support (median replay distance above
the library's own 90th-percentile leave-one-out distance).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from market_agents.atomic import write_atomic
from market_agents.core import sha256_file
from market_agents.errors import ConfigError
from market_agents.llm import prompting, schema

FEATURES = ("gap", "ret_1", "ret_h", "spread", "position", "cash_share", "halted")
ACTIONS = {"buy": 1, "sell": -1, "hold": 0}
NAMES = {v: k for k, v in ACTIONS.items()}
_SECTIONS = ("Your recent decisions", "Latest messages from your cohort")


def snapshot_features(snap: dict[str, Any]) -> np.ndarray:
    """Features of a canonical snapshot (``prompting.canonical_snapshot``), asset 0."""
    a = snap["assets"][0]
    mid = a["mid_price"] or a["last_price"] or a["public_value"]
    rp = a["recent_prices"] or [mid]
    wealth = snap["your_wealth"] or 1.0
    bid, ask = a["best_bid"], a["best_ask"]
    return np.array([
        (a["public_value"] - mid) / a["public_value"],
        mid / rp[-2] - 1.0 if len(rp) >= 2 and rp[-2] else 0.0,
        mid / rp[0] - 1.0 if rp[0] else 0.0,
        (ask - bid) / mid if bid is not None and ask is not None else 0.0,
        a["your_shares"] * mid / wealth,
        snap["your_cash"] / wealth,
        1.0 if a["halted"] else 0.0,
    ])


class DecisionLibrary:
    """Recorded decisions of one model, matched by nearest neighbour on standardized snapshot
    features (Run protocol §5.4).

    Args:
        x: snapshot features, shape ``(n, len(FEATURES))``.
        action: action code per entry (``NAMES``), shape ``(n,)``.
        qty: quantity per entry, shape ``(n,)``.
        market: 1 for a market order, shape ``(n,)``.
        offset: the limit price as a relative offset from mid, shape ``(n,)``.
        error: the answer's invalidity reason ('' when valid), shape ``(n,)``.
        meta: the model, prompt id and versions, cache and feature names.

    Raises:
        ConfigError: an empty library.
    """

    def __init__(self, x: np.ndarray, action: np.ndarray, qty: np.ndarray, market: np.ndarray,
                 offset: np.ndarray, error: np.ndarray, meta: dict[str, Any]):
        if len(x) == 0:
            raise ConfigError("decision library is empty: no matching answered requests")
        self.x, self.action, self.qty = x.astype(float), action.astype(np.int8), qty.astype(int)
        self.market, self.offset, self.error = market.astype(bool), offset.astype(float), error
        self.meta = dict(meta)
        self.mean = self.x.mean(axis=0)
        std = self.x.std(axis=0)
        self.std = np.where(std > 0, std, 1.0)
        self.z = (self.x - self.mean) / self.std
        if "loo_nn_p90" not in self.meta or "loo_nn_percentiles" not in self.meta:
            # the states the library was recorded in (N = 100), each against the others: the
            # reference a replay's distances are judged by (§5.4), as its percentiles 0..100
            loo = self._loo_nn() if len(x) > 1 else np.zeros(1)
            self.meta["loo_nn_p90"] = float(np.quantile(loo, 0.9))
            self.meta["loo_nn_percentiles"] = [round(float(q), 6)
                                               for q in np.percentile(loo, np.arange(101))]

    def __len__(self) -> int:
        return len(self.x)

    def _loo_nn(self, chunk: int = 512) -> np.ndarray:
        out = np.empty(len(self.z))
        sq = (self.z**2).sum(axis=1)
        for s in range(0, len(self.z), chunk):
            block = self.z[s : s + chunk]
            d2 = sq[s : s + chunk, None] + sq[None, :] - 2 * block @ self.z.T
            d2[np.arange(len(block)), np.arange(s, s + len(block))] = np.inf
            out[s : s + chunk] = np.sqrt(np.maximum(d2.min(axis=1), 0.0))
        return out

    def nearest(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Index and standardized distance of the nearest entry for each row of ``x`` (ties:
        the lowest index, so replays are deterministic)."""
        q = (np.atleast_2d(x) - self.mean) / self.std
        d2 = ((q[:, None, :] - self.z[None, :, :]) ** 2).sum(axis=2)
        idx = d2.argmin(axis=1)
        return idx, np.sqrt(d2[np.arange(len(q)), idx])

    def decision(self, i: int, mid: float) -> dict[str, Any]:
        """Entry ``i`` as a decision at the current ``mid`` price (a limit price is mid × (1 +
        offset), rounded to cents).
        """
        action = NAMES[int(self.action[i])]
        market = bool(self.market[i]) or action == "hold"
        price = None if market else round(mid * (1.0 + float(self.offset[i])), 2)
        return {"action": action, "quantity": int(self.qty[i]) if action != "hold" else 0,
                "order_type": "market" if market else "limit", "limit_price": price,
                "valid": not self.error[i], "error_class": self.error[i] or None}

    # --- building and files ----------------------------------------------------------------

    @classmethod
    def from_cache(cls, path: str | Path, model: str,
                   prompt_id: str | None = None) -> DecisionLibrary:
        """Build the library from a response cache: every answered single-asset market request
        of ``model`` (and ``prompt_id`` when given), without memory or channel sections.

        Raises:
            ConfigError: no matching answered request.
            CacheError: a damaged cache.
        """
        # why: the response cache (diskcache, sqlite3) is needed to build a library, not to
        # replay one
        from market_agents.llm.cache import ResponseCache

        cache = ResponseCache(path)
        try:
            good, _ = cache.scan()
        finally:
            cache.close()
        rows, versions = [], set()
        for key, body in good:
            req = body.get("request", {})
            if body.get("status") != "answered" or req.get("model") != model:
                continue
            pid = req.get("prompt_id", "")
            if not pid.startswith("market-") or (prompt_id and pid != prompt_id):
                continue
            user = "\n".join(c for r, c in req.get("messages", []) if r == "user")
            snap = prompting.extract_snapshot(user)
            if snap is None or len(snap["assets"]) != 1 or any(s in user for s in _SECTIONS):
                continue
            versions.add(req.get("prompt_version", ""))
            rows.append((key, snap, body.get("text", ""), bool(body.get("refusal"))))
        rows.sort(key=lambda r: r[0])  # a fixed order, whatever the store's
        x, act, qty, mkt, off, err = [], [], [], [], [], []
        for _, snap, text, refusal in rows:
            mid = snap["assets"][0]["mid_price"] or snap["assets"][0]["last_price"]
            x.append(snapshot_features(snap))
            try:
                if refusal:
                    raise ValueError("refusal")
                d = schema.parse_decision(text, n_assets=1)  # single-asset states only
            except ValueError as exc:
                act.append(0), qty.append(0), mkt.append(True), off.append(np.nan)
                err.append("refusal" if refusal else schema.error_class(exc))
                continue
            act.append(ACTIONS[d.action]), qty.append(d.quantity)
            mkt.append(d.order_type == "market" or d.limit_price is None)
            off.append(np.nan if mkt[-1] else d.limit_price / mid - 1.0)
            err.append("")
        meta = {"model": model, "prompt_id": prompt_id, "prompt_versions": sorted(versions),
                "source": str(path), "features": list(FEATURES)}
        return cls(np.array(x).reshape(-1, len(FEATURES)), np.array(act), np.array(qty),
                   np.array(mkt), np.array(off), np.array(err, dtype=object), meta)

    def save(self, path: str | Path) -> Path:
        """Write the library as a .npz (no pickles), atomically; return ``path``."""
        path = Path(path)
        write_atomic(path, lambda fh: np.savez(
            fh, x=self.x, action=self.action, qty=self.qty, market=self.market,
            offset=self.offset, error=self.error.astype(str),
            meta=np.array(json.dumps(self.meta, sort_keys=True, allow_nan=False))))
        return path

    @classmethod
    def load(cls, path: str | Path) -> DecisionLibrary:
        """Read a library written by :meth:`save`.

        Raises:
            ConfigError: unreadable, or built with other features.
        """
        path = Path(path)
        try:
            with np.load(path, allow_pickle=False) as f:
                meta = json.loads(str(f["meta"]))
                if meta.get("features") != list(FEATURES):
                    raise ConfigError(f"{path}: built with features {meta.get('features')}, "
                                      f"this version uses {list(FEATURES)}")
                lib = cls(f["x"], f["action"], f["qty"], f["market"], f["offset"],
                          np.array([str(e) for e in f["error"]], dtype=object), meta)
        except (OSError, KeyError, ValueError) as exc:
            raise ConfigError(f"population.llm.frozen_library: cannot read {path} ({exc})") \
                from None
        lib.meta["sha256"] = sha256_file(path)
        return lib
