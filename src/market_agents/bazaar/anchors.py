"""Scripted anchors next to the public Bazaar figures, and the orderings the environment must
show.

The public figures are bazaar-env 0.3.1's, measured by running it: mean terminal return (score,
bonuses excluded) over 20 seeds of the evaluation split (1,000,000-1,000,019), plus one figure
its README gives for train seeds 0-19. Ours are played on the same seeds; a level more than
``TOLERANCE`` away or a failed ordering fails the check (``ma bazaar anchors`` exits 1).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from market_agents.bazaar.play import play_policy
from market_agents.bazaar.tiers import TIERS, eval_seeds, get_tier, train_seeds

TOLERANCE = 0.01
PUBLIC_SEEDS = 20  # the public figures are means over 20 seeds

# tier -> policy -> metric -> public figure as printed, on the evaluation split. A figure is
# matched within TOLERANCE, or within half a unit of its last printed digit if that is wider
# (the pickoff loss 17.2 is printed to one decimal).
PUBLIC: dict[str, dict[str, dict[str, str]]] = {
    "micro": {"passive": {"score": "0.9995"}, "honest": {"score": "1.0410"},
              "gambler": {"score": "1.0076"}, "loop_spammer": {"score": "1.0007"}},
    "trivial": {"passive": {"score": "1.0000"}, "honest": {"score": "1.0184"},
                "gambler": {"score": "0.9957"}},
    "easy": {"passive": {"score": "1.0000"}, "honest": {"score": "1.0062"},
             "gambler": {"score": "0.9786"}},
    "hard": {"passive": {"score": "1.0000"}, "honest": {"score": "0.9975"},
             "gambler": {"score": "0.9633"}},
    "maker_micro": {
        "passive": {"score": "0.9995"}, "honest": {"score": "1.0274"},
        "gambler": {"score": "1.0000"},
        "wide": {"score": "0.9996"},
        "tight": {"score": "0.9994", "maker_fills": "42.0", "pickoff_loss": "6.45"},
        "vol_aware": {"score": "1.0200", "maker_fills": "16.85", "pickoff_loss": "0.00"},
        "threshold_taker": {"score": "1.0279"},
    },
    "maker_easy": {
        "passive": {"score": "0.9990"}, "honest": {"score": "1.0093"},
        "gambler": {"score": "0.9905"},
        "wide": {"score": "0.9991"}, "tight": {"score": "0.9854", "pickoff_loss": "17.2"},
        "vol_aware": {"score": "1.0027"}, "threshold_taker": {"score": "1.0067"},
    },
    "credit_micro": {"passive": {"score": "0.9990"}, "margin_taker": {"score": "1.0669"},
                     "margin_gambler": {"score": "0.9753"}},
}
# The same, on train seeds 0-19 (the public README's credit figure).
PUBLIC_TRAIN: dict[str, dict[str, dict[str, str]]] = {
    "credit_micro": {"margin_taker": {"score": "1.0495"}},
}

# The anchor a farm must not beat, per tier (the exploit pass). On taker tiers it is the honest
# dealer that also collects the once-only trade bonus (policies.honest_bonus).
HONEST_ANCHOR = {
    "micro": "honest_bonus",
    "trivial": "honest_bonus",
    "easy": "honest_bonus",
    "hard": "honest_bonus",
    "maker_micro": "vol_aware",
    "maker_easy": "vol_aware",
    "credit_micro": "margin_taker",
}

METRICS = ("score", "maker_fills", "pickoff_loss")


def run_policy(tier: str, policy: str, seeds: list[int]) -> list[dict]:
    """Play ``policy`` on ``tier`` for each seed; one result per episode."""
    return [play_policy(tier, s, policy) for s in seeds]


def _mean(episodes: list[dict], key: str) -> float:
    return float(np.mean([e[key] for e in episodes]))


def summarize(tier: str, policy: str, episodes: list[dict]) -> dict:
    """Means over ``episodes`` of one policy on one tier."""
    scores = np.array([e["score"] for e in episodes])
    return {
        "tier": tier,
        "policy": policy,
        "episodes": len(episodes),
        "score": float(scores.mean()),
        "score_min": float(scores.min()),
        "score_max": float(scores.max()),
        "reward": _mean(episodes, "reward"),
        "trades": _mean(episodes, "trades"),
        "maker_fills": _mean(episodes, "maker_fills"),
        "realized_spread": _mean(episodes, "realized_spread"),
        "pickoff_loss": _mean(episodes, "pickoff_loss"),
        "defaults": int(sum(e["termination"] == "default" for e in episodes)),
        "illegal": int(sum(e["illegal"] for e in episodes)),
    }


def _scores(eps: dict, policy: str) -> np.ndarray:
    return np.array([e["score"] for e in eps[policy]])


def _beats_on_every_seed(a: str, b: str) -> Callable[[dict], bool]:
    return lambda eps: bool(np.all(_scores(eps, a) > _scores(eps, b)))


# The public per-seed orderings.
ORDERINGS: dict[str, list[tuple[str, Callable[[dict], bool]]]] = {
    "micro": [("honest beats passive on every seed", _beats_on_every_seed("honest", "passive"))],
    "maker_micro": [("vol_aware beats tight on every seed",
                     _beats_on_every_seed("vol_aware", "tight"))],
    "credit_micro": [
        ("margin_taker beats passive on every seed",
         _beats_on_every_seed("margin_taker", "passive")),
        ("margin_taker beats margin_gambler on every seed",
         _beats_on_every_seed("margin_taker", "margin_gambler")),
        ("no policy defaults at 1x leverage",
         lambda eps: all(e["termination"] != "default" for p in eps.values() for e in p)),
    ],
}


def _levels(tier: str, block: str, public: dict, rows: dict) -> list[dict]:
    out = []
    for policy, figures in public.get(tier, {}).items():
        for metric, theirs in figures.items():
            ours, decimals = rows[policy][metric], len(theirs.partition(".")[2])
            tolerance = max(TOLERANCE, 0.5 * 10.0**-decimals)
            out.append({"tier": tier, "block": block, "kind": "level",
                        "claim": f"{policy} {metric} {ours:.4f} vs public {theirs} "
                                 f"(within {tolerance:g})",
                        "ok": abs(ours - float(theirs)) <= tolerance + 1e-12})
    return out


def anchors(tiers: list[str] | None = None, n_seeds: int = 20) -> tuple[list[dict], list[dict]]:
    """Rows (one per tier, policy and seed block: ``eval`` or ``train``) and claims (levels
    against the public figures, checked when ``n_seeds`` is 20, and the per-seed orderings on
    both seed blocks), each with ``ok``."""
    rows, claims = [], []
    for tier in tiers or list(TIERS):
        get_tier(tier)
        for block, seeds, public in (("eval", eval_seeds(n_seeds), PUBLIC),
                                     ("train", train_seeds(n_seeds), PUBLIC_TRAIN)):
            eps = {p: run_policy(tier, p, seeds) for p in PUBLIC[tier]}
            summary = {p: summarize(tier, p, e) for p, e in eps.items()}
            for p, row in summary.items():
                row["block"] = block
                figure = public.get(tier, {}).get(p, {}).get("score")
                row["public"] = None if figure is None else float(figure)
                rows.append(row)
            if n_seeds == PUBLIC_SEEDS:
                claims += _levels(tier, block, public, summary)
            claims += [{"tier": tier, "block": block, "kind": "ordering", "claim": text,
                        "ok": bool(check(eps))} for text, check in ORDERINGS.get(tier, [])]
    return rows, claims


def format_table(rows: list[dict], claims: list[dict]) -> str:
    """Ours next to the public figures, evaluation split then train seeds, and the checks."""
    def fmt(x: float | None) -> str:
        return "-" if x is None else f"{x:.4f}"

    train = {(r["tier"], r["policy"]): r for r in rows if r["block"] == "train"}
    head = (f"{'tier':13} {'policy':16} {'eval':>7} {'public':>7} {'diff':>7}  {'train':>7} "
            f"{'public':>7}  {'fills':>6} {'pickoff':>7} {'dflt':>4}")
    lines = [head, "-" * len(head)]
    for r in (r for r in rows if r["block"] == "eval"):
        t = train[r["tier"], r["policy"]]
        diff = None if r["public"] is None else r["score"] - r["public"]
        lines.append(
            f"{r['tier']:13} {r['policy']:16} {r['score']:7.4f} {fmt(r['public']):>7} "
            f"{fmt(diff):>7}  {t['score']:7.4f} {fmt(t['public']):>7}  {r['maker_fills']:6.2f} "
            f"{r['pickoff_loss']:7.2f} {r['defaults'] + t['defaults']:4d}"
        )
    lines += [
        "eval: mean score (terminal return, no bonuses) on seeds 1,000,000.., train: on seeds "
        "0..; public: bazaar-env 0.3.1; fills (units) and pickoff (cash) on the eval split",
        "",
    ]
    if not any(c["kind"] == "level" for c in claims):
        lines.append(f"levels not checked: the public figures are means over {PUBLIC_SEEDS} "
                     "seeds")
    for c in claims:
        lines.append(f"[{'ok' if c['ok'] else 'FAIL'}] {c['tier']} {c['block']}: {c['claim']}")
    return "\n".join(lines)
