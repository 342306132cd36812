"""Scripted anchors over the frozen evaluation split, next to the public Bazaar figures, and the
orderings the environment must show."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from market_agents.bazaar.play import play_policy
from market_agents.bazaar.tiers import TIERS, eval_seeds, get_tier

# Public mean scores (net worth at the index / starting net worth, bonuses excluded) over 20
# evaluation seeds, as printed in the public Bazaar README and issue 6. None: no public figure.
# maker_micro "wide" is described publicly as "does nothing (about 1.0)", not measured.
PUBLIC: dict[str, dict[str, float | None]] = {
    "micro": {"passive": 1.000, "honest": 1.053, "gambler": 1.020},
    "hard": {"passive": None, "honest": 0.998, "gambler": 0.957},
    "maker_micro": {
        "passive": None, "honest": None, "vol_aware": 1.020, "tight": 0.996, "wide": 1.0,
        "avellaneda_stoikov": None,
    },
    "maker_easy": {
        "passive": None, "vol_aware": None, "tight": None, "wide": None,
        "avellaneda_stoikov": None,
    },
    "credit_micro": {
        "passive": 0.998, "honest": 1.043, "margin_taker": 1.0495, "margin_gambler": 0.981,
    },
}

# The anchor a farm must not beat, per tier (the exploit pass).
HONEST_ANCHOR = {
    "micro": "honest",
    "hard": "honest",
    "maker_micro": "vol_aware",
    "maker_easy": "vol_aware",
    "credit_micro": "margin_taker",
}


def run_policy(tier: str, policy: str, seeds: list[int]) -> list[dict]:
    return [play_policy(tier, s, policy) for s in seeds]


def summarize(tier: str, policy: str, episodes: list[dict]) -> dict:
    def mean(key: str) -> float:
        return float(np.mean([e[key] for e in episodes]))

    scores = np.array([e["score"] for e in episodes])
    return {
        "tier": tier,
        "policy": policy,
        "episodes": len(episodes),
        "score": float(scores.mean()),
        "score_min": float(scores.min()),
        "score_max": float(scores.max()),
        "reward": mean("reward"),
        "public": PUBLIC.get(tier, {}).get(policy),
        "trades": mean("trades"),
        "maker_fills": mean("maker_fills"),
        "realized_spread": mean("realized_spread"),
        "pickoff_loss": mean("pickoff_loss"),
        "defaults": int(sum(e["termination"] == "default" for e in episodes)),
        "illegal": int(sum(e["illegal"] for e in episodes)),
    }


Claim = tuple[str, Callable[[dict], bool]]


def _scores(eps: dict, policy: str) -> np.ndarray:
    return np.array([e["score"] for e in eps[policy]])


def _m(eps: dict, policy: str, key: str = "score") -> float:
    return float(np.mean([e[key] for e in eps[policy]]))


CLAIMS: dict[str, list[Claim]] = {
    "micro": [
        ("honest beats passive on every seed",
         lambda e: bool(np.all(_scores(e, "honest") > _scores(e, "passive")))),
        ("passive < gambler < honest (means)",
         lambda e: _m(e, "passive") < _m(e, "gambler") < _m(e, "honest")),
    ],
    "hard": [
        ("honest within 0.02 of 1.0", lambda e: abs(_m(e, "honest") - 1.0) < 0.02),
        ("honest > gambler", lambda e: _m(e, "honest") > _m(e, "gambler")),
    ],
    "maker_micro": [
        ("vol_aware > 1", lambda e: _m(e, "vol_aware") > 1.0),
        ("vol_aware pickoff loss near zero (< 1 per episode)",
         lambda e: _m(e, "vol_aware", "pickoff_loss") < 1.0),
        ("tight fills more often than vol_aware",
         lambda e: _m(e, "tight", "maker_fills") > _m(e, "vol_aware", "maker_fills")),
        ("tight loses more to pickoff than it earns in spread",
         lambda e: _m(e, "tight", "pickoff_loss") > _m(e, "tight", "realized_spread")),
        ("tight < vol_aware", lambda e: _m(e, "tight") < _m(e, "vol_aware")),
        ("wide does nothing (no fills, score = passive)",
         lambda e: _m(e, "wide", "maker_fills") == 0
         and abs(_m(e, "wide") - _m(e, "passive")) < 1e-9),
    ],
    "maker_easy": [
        ("vol_aware > 1", lambda e: _m(e, "vol_aware") > 1.0),
        ("tight < vol_aware", lambda e: _m(e, "tight") < _m(e, "vol_aware")),
    ],
    "credit_micro": [
        ("margin_taker > passive > margin_gambler",
         lambda e: _m(e, "margin_taker") > _m(e, "passive") > _m(e, "margin_gambler")),
        ("every default scores 0",
         lambda e: all(x["score"] == 0.0 for p in e.values() for x in p
                       if x["termination"] == "default")),
    ],
}


def anchors(tiers: list[str] | None = None, n_seeds: int = 20) -> tuple[list[dict], list[dict]]:
    """Rows (one per tier and policy) and claims (one per ordering, with ``ok``)."""
    rows, claims = [], []
    for tier in tiers or list(TIERS):
        get_tier(tier)
        seeds = eval_seeds(n_seeds)
        eps = {p: run_policy(tier, p, seeds) for p in PUBLIC[tier]}
        rows += [summarize(tier, p, e) for p, e in eps.items()]
        for text, check in CLAIMS.get(tier, []):
            claims.append({"tier": tier, "claim": text, "ok": bool(check(eps))})
    return rows, claims


def format_table(rows: list[dict], claims: list[dict]) -> str:
    head = f"{'tier':13} {'policy':19} {'ours':>7} {'public':>7} {'min':>7} {'reward':>7} " \
           f"{'fills':>6} {'spread':>7} {'pickoff':>7} {'dflt':>4}"
    lines = [head, "-" * len(head)]
    for r in rows:
        pub = "-" if r["public"] is None else f"{r['public']:.4f}"
        lines.append(
            f"{r['tier']:13} {r['policy']:19} {r['score']:7.4f} {pub:>7} {r['score_min']:7.4f} "
            f"{r['reward']:7.4f} {r['maker_fills']:6.1f} {r['realized_spread']:7.2f} "
            f"{r['pickoff_loss']:7.2f} {r['defaults']:4d}"
        )
    lines.append("public: the public Bazaar figures (maker_micro wide: described as about 1.0); "
                 "ours: mean score over the same number of evaluation seeds")
    lines.append("")
    for c in claims:
        lines.append(f"[{'ok' if c['ok'] else 'FAIL'}] {c['tier']}: {c['claim']}")
    return "\n".join(lines)
