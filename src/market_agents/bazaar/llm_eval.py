"""``ma bazaar eval``: play episodes with any provider of the LLM layer (mock included), through
its cache, pricing and USD caps, and write transcripts, scores and a summary.

Episodes advance in lockstep: each round sends one request per unfinished episode in one
``complete_many`` batch, so the provider sees them concurrently and results come back in
episode order. Every score is re-checked by replaying the transcript through the engine.

An episode in which a turn got no answer (a call that failed after its retries, a budget halt)
is *errored*: the model did not play that turn, so it is never scored as a ``pass``. Its score
columns are empty, the means leave it out, and the summary counts errored episodes by class;
when every episode errored the command exits 1.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from market_agents import provider_kinds
from market_agents.atomic import write_json_atomic, write_parquet_atomic, write_text_atomic
from market_agents.bazaar import mock_agent
from market_agents.bazaar.anchors import HONEST_ANCHOR, run_policy
from market_agents.bazaar.engine import BazaarEnv
from market_agents.bazaar.play import max_messages, replay
from market_agents.bazaar.prompts import PROMPT_VERSION, prompt_id, system_prompt
from market_agents.bazaar.tiers import Tier, eval_seeds, get_tier, train_seeds
from market_agents.errors import ConfigError
from market_agents.inputs import base_url_arg
from market_agents.llm.types import LLMRequest, Message

SCORE_KEYS = ("score", "reward", "format_bonus", "trade_bonus", "termination", "turns_played",
              "trades", "illegal", "maker_fills", "realized_spread", "pickoffs", "pickoff_loss",
              "bait_hits", "trigger_hits", "interest_paid", "margin_calls")


def register_eval(bsub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``ma bazaar eval`` and its arguments to the ``ma bazaar`` subcommands; return its
    parser.
    """
    e = bsub.add_parser(
        "eval",
        help=f"play episodes with an LLM provider ({', '.join(provider_kinds.served())})",
        description="Play SEEDS episodes of TIER with one model through the shared LLM layer "
        "(cache, pricing, USD cap) and write transcripts.jsonl, scores.parquet and summary.json "
        "to OUT. A cached run replays with zero calls.",
    )
    e.add_argument("--tier", required=True, help="tier name")
    e.add_argument("--provider", required=True, metavar="|".join(provider_kinds.served()),
                   help="the provider kind (provider_kinds.py): "
                   + "; ".join(f"{k.name}: {k.summary}" for k in provider_kinds.declared()
                               if k.provider is not None))
    e.add_argument("--model", default=None, help="model id (priced in config/prices.yaml); "
                   "default mock-trader for the mock")
    e.add_argument("--seeds", type=int, default=20, help="episodes (default 20)")
    e.add_argument("--split", choices=["eval", "train"], default="eval",
                   help="eval: seeds from 1,000,000 (default); train: seeds from 0")
    e.add_argument("--cache", default=None, help="response cache directory")
    e.add_argument("--usd-cap", type=float, default=0.0,
                   help="USD cap for the whole evaluation (required > 0 for live providers)")
    e.add_argument("--base-url", default=None, type=base_url_arg,
                   help="openai_compatible server URL (http:// or https://)")
    e.add_argument("--free", action="store_true",
                   help="openai_compatible only: the model costs nothing (a server you run); "
                   "priced at 0 USD without a row in the price table")
    e.add_argument("--max-output-tokens", type=int, default=1024,
                   help="most tokens one answer may have (default 1024; a small local model "
                   "runs faster with ~200)")
    e.add_argument("--timeout", type=float, default=60.0,
                   help="seconds one call may take before it is retried (default 60; a local "
                   "CPU model may need 300)")
    e.add_argument("--reasoning-effort", default=None,
                   choices=["minimal", "low", "medium", "high"])
    e.add_argument("--concurrency", type=int, default=16, help="concurrent requests")
    e.add_argument("--out", required=True, help="output directory")
    e.set_defaults(func=cmd_eval)
    return e


def cmd_eval(args: argparse.Namespace,
             paying: Callable[[float, int], AbstractContextManager[dict]] | None = None
             ) -> int:
    """Run the evaluation. ``paying(usd_cap, in_flight)``: for a paid provider, the spend
    record the command keeps while it runs (entered before the first call, given the USD
    paid at the end as ``spent_usd``; ``in_flight``: its most paid calls at once); ``ma bazaar
    eval`` passes the project's spend ledger."""
    # why: `ma` imports this module to register `ma bazaar eval`; the LLM client (asyncio,
    # ssl, the SDKs) loads only when an evaluation runs
    from market_agents.llm.client import LLMClient
    from market_agents.llm.config import LLMConfig, ProviderSettings
    from market_agents.llm.pricing import run_prices

    tier = get_tier(args.tier)
    if args.seeds < 1:
        raise ConfigError(f"--seeds must be >= 1, got {args.seeds}")
    if args.timeout <= 0:
        raise ConfigError(f"--timeout must be > 0 seconds, got {args.timeout}")
    if args.max_output_tokens < 16:
        raise ConfigError(f"--max-output-tokens must be >= 16, got {args.max_output_tokens}")
    if args.provider not in provider_kinds.served():
        raise ConfigError(f"--provider: provider {args.provider!r} is unknown; use one of "
                          f"{provider_kinds.served()}")
    model = args.model or ("mock-trader" if args.provider == "mock" else None)
    if model is None:
        raise ConfigError(f"--model is required for provider {args.provider!r}")
    try:
        llm = LLMConfig(
            provider_mix={args.provider: 1.0}, models={args.provider: model},
            usd_cap=args.usd_cap, max_concurrency=args.concurrency,
            max_output_tokens=args.max_output_tokens, reasoning_effort=args.reasoning_effort,
            providers={args.provider: ProviderSettings(base_url=args.base_url,
                                                       timeout_s=args.timeout,
                                                       free=args.free)},
        )
    except ValueError as exc:
        errors = getattr(exc, "errors", None)
        msg = errors()[0]["msg"] if errors else str(exc)
        raise ConfigError(f"--provider {args.provider!r} / --model {model!r}: {msg}") from None
    mock_agent.register()
    seeds = eval_seeds(args.seeds) if args.split == "eval" else train_seeds(args.seeds)
    # checks cap and key; no call
    client = LLMClient.from_settings(llm, cache_path=args.cache, prices=run_prices(llm))
    try:
        record = (paying(args.usd_cap, llm.paid_in_flight()) if paying and llm.paid_routes()
                  else contextlib.nullcontext({}))
        with record as rec:
            episodes = evaluate(client, tier, args.provider, model, seeds, llm)
            usage = client.usage_summary()
            # What the evaluation's answers cost, cache hits included (a rerun from the cache
            # must not erase what the first run paid): every answer is from the paid route.
            rec["spent_usd"] = usage.get("usd_live", usage["usd"])
    finally:
        client.close()
    summary = write_outputs(Path(args.out), tier, args.provider, model, args.split, episodes,
                            usage)
    errors = ", ".join(f"{k} {v}" for k, v in summary["errors_by_class"].items())
    if not summary["scored"]:
        print(f"ma bazaar eval: all {summary['episodes']} episode(s) errored ({errors}): no "
              f"model answer for some turn, so nothing is scored (calls {usage['calls']}, "
              f"failures {usage['failures']}, budget halts {usage['budget_halts']}) -> "
              f"{args.out}", file=sys.stderr)
        return 1
    print(f"{tier.name} {args.provider}/{model}: mean score {summary['score']:.4f} "
          f"(anchor {summary['anchor']} {summary['anchor_score']:.4f}), mean reward "
          f"{summary['reward']:.4f}, illegal {summary['illegal']}, calls {usage['calls']}, "
          f"cache hits {usage['cache_hits']}, usd {usage['usd_spent']:.4f} -> {args.out}")
    if summary["errored"]:
        print(f"  {summary['errored']} of {summary['episodes']} episode(s) errored ({errors}) "
              "and are left out of the means")
    return 0


def evaluate(client, tier: Tier, provider: str, model: str, seeds: list[int], llm) -> list[dict]:
    """Play one episode per seed with one model, all seeds' turns batched through the LLM
    client (its cache, prices and USD cap).

    Args:
        client: the :class:`~market_agents.llm.client.LLMClient`.
        tier: the tier.
        provider: the provider kind.
        model: the model id.
        seeds: the episodes' seeds.
        llm: the LLM settings (tokens, effort, temperature) of the requests.

    Returns:
        One episode record per seed: its scores, transcript, messages, calls, USD, invalid
        messages, why it stopped early (if it did), whether it errored and one usage row per
        LLM call. An errored episode (a turn without an answer) has None for every score.
    """
    envs = {s: BazaarEnv(tier) for s in seeds}
    system = system_prompt(tier)
    chats: dict[int, list[Message]] = {}
    episodes: dict[int, dict] = {}
    for s, env in envs.items():
        chats[s] = [Message("system", system), Message("user", env.reset(s))]
        episodes[s] = {"messages": [], "calls": 0, "usd": 0.0, "invalid": 0, "stopped": None,
                       "llm": []}
    for _ in range(max_messages(tier)):
        live = [s for s in seeds if not envs[s].done and episodes[s]["stopped"] is None]
        if not live:
            break
        requests = [
            LLMRequest(provider=provider, model=model, messages=tuple(chats[s]),
                       route=provider, timeout_s=llm.settings(provider).timeout_s,
                       prompt_id=prompt_id(tier), prompt_version=PROMPT_VERSION,
                       max_output_tokens=llm.max_output_tokens,
                       reasoning_effort=llm.reasoning_effort, temperature=llm.temperature,
                       agent=f"bazaar-{tier.name}-{s}")
            for s in live
        ]
        results = client.complete_many(requests, where=f"bazaar {tier.name}")
        for s, res in zip(live, results, strict=True):
            ep = episodes[s]
            ep["calls"] += 1
            ep["usd"] += res.usd
            ep["llm"].append({"cache_hit": res.cache_hit, "error": res.error_class,
                              "usd": res.usd, "tokens_in": res.usage.input,
                              "tokens_out": res.usage.output,
                              "latency_s": round(res.latency_s, 4)})
            if res.text is None:  # budget halt or failure after retries: no answer exists
                ep["stopped"] = res.error_class or "failed"
                continue
            obs, _, done, info = envs[s].step(res.text)
            ep["invalid"] += int(not info["legal"])
            ep["messages"].append(res.text)
            chats[s] += [Message("assistant", res.text), Message("user", obs)]
    out = []
    for s in seeds:
        ep, env = episodes[s], envs[s]
        if ep["stopped"] is not None:
            # A turn the model never answered is not its pass: playing the missing turns as
            # passes scored a dead server 1.2 with the full format bonus. No score at all.
            scores, truncated, transcript = dict.fromkeys(SCORE_KEYS), True, env.transcript
        else:
            # Replaying the recorded messages must reproduce the score.
            rep = replay(tier, s, ep["messages"])
            if env.done and abs(rep["reward"] - env.summary()["reward"]) > 1e-12:
                raise AssertionError(f"bazaar replay mismatch on seed {s}")
            scores, truncated, transcript = ({k: rep[k] for k in SCORE_KEYS}, rep["truncated"],
                                             rep["transcript"])
        out.append({"seed": s, **scores, "truncated": truncated, "stopped": ep["stopped"],
                    "errored": ep["stopped"] is not None, "calls": ep["calls"],
                    "usd": ep["usd"], "invalid_messages": ep["invalid"],
                    "messages": ep["messages"], "transcript": transcript, "llm": ep["llm"]})
    return out


def write_outputs(out: Path, tier: Tier, provider: str, model: str, split: str,
                  episodes: list[dict], usage: dict) -> dict:
    """Write transcripts.jsonl, scores.parquet and summary.json under ``out``; return the
    summary: the means over the scored episodes (None when none is), the tier's anchor on
    the same seeds, the errored episodes by class, LLM usage.
    """
    import polars as pl  # why: `ma` imports this module at start-up; polars loads to write

    write_text_atomic(out / "transcripts.jsonl", "".join(
        json.dumps({"tier": tier.name, "provider": provider, "model": model,
                    "seed": ep["seed"], "messages": ep["messages"],
                    "transcript": ep["transcript"], "llm": ep["llm"]},
                   separators=(",", ":"), allow_nan=False) + "\n" for ep in episodes))
    rows = [{"tier": tier.name, "provider": provider, "model": model,
             **{k: v for k, v in ep.items() if k not in ("messages", "transcript", "llm")}}
            for ep in episodes]
    write_parquet_atomic(out / "scores.parquet", pl.DataFrame(rows))
    seeds = [ep["seed"] for ep in episodes]
    scored = [ep for ep in episodes if not ep["errored"]]
    anchor = HONEST_ANCHOR[tier.name]
    # the anchor on the seeds the model was scored on, so the two means compare
    anchor_eps = run_policy(tier.name, anchor, [ep["seed"] for ep in scored])

    def mean(key, eps=scored):
        return sum(e[key] for e in eps) / len(eps) if eps else None

    summary = {
        "tier": tier.name, "provider": provider, "model": model, "split": split,
        "prompt_version": PROMPT_VERSION, "episodes": len(episodes), "seeds": seeds,
        "scored": len(scored), "errored": len(episodes) - len(scored),
        "errors_by_class": dict(sorted(Counter(
            ep["stopped"] for ep in episodes if ep["errored"]).items())),
        "score": mean("score"), "reward": mean("reward"),
        "score_min": min((e["score"] for e in scored), default=None),
        "illegal": sum(e["illegal"] for e in scored),
        "spam_ends": sum(e["termination"] == "spam" for e in scored),
        "defaults": sum(e["termination"] == "default" for e in scored),
        "stopped": len(episodes) - len(scored),
        "anchor": anchor, "anchor_score": mean("score", anchor_eps),
        "anchor_reward": mean("reward", anchor_eps),
        "usage": usage,
    }
    write_json_atomic(out / "summary.json", summary)
    return summary
