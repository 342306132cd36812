"""``ma bazaar``: the Bazaar dealer-market environment (anchors, exploit pass, one episode, LLM
evaluation). Each subcommand writes its files under ``--out`` so a workflow rule can call it."""

from __future__ import annotations

import argparse
import json

from market_agents.atomic import write_json_atomic, write_parquet_atomic, write_text_atomic
from market_agents.commands import add_results_flag, out_dir
from market_agents.errors import ConfigError


def _tier_list(value: str) -> list[str]:
    from market_agents.bazaar.tiers import TIERS, get_tier

    if value == "all":
        return list(TIERS)
    names = [v.strip() for v in value.split(",") if v.strip()]
    for n in names:
        get_tier(n)
    return names


def _seeds(n: int, arg: str = "--seeds") -> int:
    if n < 1:
        raise ConfigError(f"{arg} must be >= 1, got {n}")
    return n


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ma bazaar`` and its arguments to the ``ma`` subcommands."""
    p = sub.add_parser(
        "bazaar",
        help="Bazaar: a dealer-market environment for single LLM agents",
        description="Bazaar: one agent trades one commodity against scripted quotes while a "
        "seeded exogenous index sets fair value; the public environment's tiers and mechanics "
        "(docs/bazaar.md). Tiers: micro, trivial, easy, hard (taker), maker_micro, maker_easy "
        "(maker), credit_micro (margin). Evaluation seeds start at 1,000,000, train seeds at 0.",
    )
    bsub = p.add_subparsers(dest="bazaar_command", metavar="SUBCOMMAND", required=True)

    a = bsub.add_parser(
        "anchors",
        help="scripted anchors next to the public figures (eval split and train seeds)",
        description="Play every scripted anchor of each tier on the frozen evaluation seeds "
        "(1,000,000..) and on train seeds (0..), print mean scores next to the public Bazaar "
        "figures (bazaar-env 0.3.1) and check them: each level within 0.01 (with --seeds 20, the "
        "public figures' seed count) and the per-seed orderings. Exit 1 if a check fails.",
    )
    a.add_argument("--tiers", default="all", help="comma-separated tiers or 'all' (default)")
    a.add_argument("--seeds", type=int, default=20,
                   help="seeds per tier and block (default 20, as the public figures)")
    a.add_argument("--out", default=None, help="directory for anchors.json and anchors.parquet")
    a.set_defaults(func=cmd_anchors)

    x = bsub.add_parser(
        "exploits",
        help="deterministic reward farms against the tier's honest or vol-aware anchor",
        description="Run the reward farms (self-trading, quote stuffing, bonus farming, loop "
        "spamming, varied spamming, prose rambling, default lottery) on the evaluation seeds "
        "and on train seeds and compare their mean reward (score + bonuses) with the tier's "
        "anchor (honest dealer on taker tiers, vol-aware quoter on maker tiers, margin taker "
        "on credit). Exit 1 if a farm beats it on either block.",
    )
    x.add_argument("--tier", required=True, help="tier name, comma-separated list, or 'all'")
    x.add_argument("--seeds", type=int, default=20, help="seeds per block (default 20)")
    x.add_argument("--out", default=None, help="directory for exploits_<tier>.json")
    x.set_defaults(func=cmd_exploits)

    e = bsub.add_parser(
        "play",
        help="play one episode with a scripted policy and print the transcript",
        description="Play one episode of TIER with a scripted POLICY and print each message and "
        "observation, then the score.",
    )
    e.add_argument("--tier", required=True, help="tier name")
    e.add_argument("--policy", required=True,
                   help="passive, honest, honest_bonus, gambler, loop_spammer, "
                   "threshold_taker, margin_taker, margin_gambler, wide, tight, vol_aware, "
                   "avellaneda_stoikov")
    e.add_argument("--seed", type=int, default=1_000_000, help="episode seed (default 1000000)")
    e.add_argument("--out", default=None,
                   help="directory for transcript.jsonl and summary.json")
    e.set_defaults(func=cmd_play)

    from market_agents.bazaar.llm_eval import register_eval

    ev = register_eval(bsub)
    add_results_flag(ev, "the working directory", "results root whose spend ledger a paid "
                     "provider is checked against and recorded in")
    ev.description += (" A paid provider is refused before any call when --usd-cap plus the "
                       "project's recorded spend passes the project cap (docs/guards.md).")
    ev.set_defaults(func=cmd_eval)


def cmd_eval(args: argparse.Namespace) -> int:
    """``ma bazaar eval`` with the project's spend ledger: a paid evaluation plans its USD cap."""
    from market_agents.bazaar import llm_eval
    from market_agents.commands import build_guard, results_root

    out_dir(args.out)
    guard = build_guard(results_root(args.results, None))

    def paying(planned_usd: float, in_flight: int):
        guard.check_caps(planned_usd, f"ma bazaar eval {args.tier} {args.provider}/"
                         f"{args.model}")
        return guard.paying(args.out, planned_usd, kind="bazaar", cache=args.cache,
                            in_flight=in_flight)

    return llm_eval.cmd_eval(args, paying)


def cmd_anchors(args: argparse.Namespace) -> int:
    """``ma bazaar anchors``: play the scripted anchors and print them beside the public figures.

    Args:
        args: the parsed arguments (``--tiers``, ``--seeds``, ``--out``).

    Returns:
        The exit code: 0 when every claim holds (each level within 0.01 of the public figure,
        each ordering as published), else 1.
    """
    import polars as pl

    from market_agents.bazaar.anchors import anchors, format_table

    out = out_dir(args.out)
    rows, claims = anchors(_tier_list(args.tiers), _seeds(args.seeds))
    print(format_table(rows, claims))
    if out is not None:
        write_json_atomic(out / "anchors.json",
                          {"seeds": args.seeds, "rows": rows, "claims": claims})
        write_parquet_atomic(out / "anchors.parquet", pl.DataFrame(rows))
    return 0 if all(c["ok"] for c in claims) else 1


def cmd_exploits(args: argparse.Namespace) -> int:
    """``ma bazaar exploits``: run every exploit farm against its tier's anchor on both seed
    blocks (docs/bazaar.md, "The exploit pass").

    Args:
        args: the parsed arguments (``--tier``, ``--seeds``, ``--out``).

    Returns:
        The exit code: 1 when a farm beats its anchor, else 0.
    """
    from market_agents.bazaar.exploits import BLOCKS, exploit_pass, format_report

    out = out_dir(args.out)
    beaten = False
    tiers, n = _tier_list(args.tier), _seeds(args.seeds)
    for tier in tiers:
        blocks = {}
        for block in BLOCKS:
            anchor, rows = exploit_pass(tier, n, block)
            print(format_report(anchor, rows))
            print()
            beaten |= any(r["beats"] for r in rows)
            blocks[block] = {"anchor": anchor, "farms": rows}
        if out is not None:
            write_json_atomic(out / f"exploits_{tier}.json",
                              {"tier": tier, "seeds": n, "blocks": blocks})
    print("a farm BEATS its anchor" if beaten
          else "no farm beats its tier's anchor on either seed block")
    return 1 if beaten else 0


def cmd_play(args: argparse.Namespace) -> int:
    """``ma bazaar play``: print one episode of a scripted policy, and write its transcript.

    Args:
        args: the parsed arguments (``--tier``, ``--seed``, ``--policy``, ``--out``).

    Returns:
        The exit code: 0.

    Raises:
        ConfigError: an unknown tier or policy, or a quoting policy on a taker tier.
    """
    from market_agents.bazaar.play import play_policy

    out = out_dir(args.out)
    _tier_list(args.tier)
    result = play_policy(args.tier, args.seed, args.policy)
    lines = [json.dumps(r, separators=(",", ":"), allow_nan=False) for r in result["transcript"]]
    for r in result["transcript"]:
        print(f"> {r['message']}\n{r['observation']}")
    print(f"score {result['score']:.4f}  reward {result['reward']:.4f}  "
          f"end {result['termination']}")
    if out is not None:
        write_text_atomic(out / "transcript.jsonl", "\n".join(lines) + "\n")
        write_json_atomic(out / "summary.json",
                    {k: v for k, v in result.items() if k != "transcript"})
    return 0
