"""``ma cache``: what an LLM response cache (the decision library) holds, verified entry by
entry."""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from market_agents.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "cache",
        help="summarize and verify an LLM response cache",
        description="Count the entries of an LLM response cache by provider, model and prompt "
        "version: answered and failed calls, valid decisions, tokens and recorded USD. Every "
        "entry's checksum is verified; corrupt entries are listed, not deleted (a run deletes "
        "and re-fetches them). Exit code 1 when any entry is corrupt.",
    )
    p.add_argument("path", help="cache directory, e.g. results/cache/pilot_openai.sqlite")
    p.add_argument("--json", action="store_true", help="print JSON for machines")
    p.set_defaults(func=main)


def summarize(path: str | Path) -> dict:
    from market_agents.llm.cache import ResponseCache
    from market_agents.llm.client import is_valid_entry

    path = Path(path)
    if not (path / "cache.db").exists():
        raise ConfigError(f"{path}: not an LLM response cache (no cache.db inside)")
    cache = ResponseCache(path)
    try:
        good, bad = cache.scan()
    finally:
        cache.close()
    groups: dict[tuple, dict] = defaultdict(lambda: defaultdict(float))
    for _, body in good:
        req = body.get("request", {})
        g = groups[(req.get("provider", "?"), req.get("model", "?"),
                    req.get("prompt_version", "?"))]
        g["entries"] += 1
        if body.get("status") == "answered":
            g["answered"] += 1
            g["valid"] += is_valid_entry(body)
            for k in ("input", "cached_input", "output", "reasoning"):
                g[f"tokens_{k}"] += body.get("usage", {}).get(k, 0)
            g["usd"] += body.get("usd", 0.0)
        else:
            g["failed"] += 1
    rows = [{"provider": p, "model": m, "prompt_version": v}
            | {k: (round(x, 8) if k == "usd" else int(x)) for k, x in sorted(g.items())}
            for (p, m, v), g in sorted(groups.items())]
    return {"path": str(path), "entries": len(good) + len(bad), "corrupt": bad, "groups": rows,
            "usd": round(sum(r.get("usd", 0.0) for r in rows), 8)}


def main(args: argparse.Namespace) -> int:
    s = summarize(args.path)
    if args.json:
        print(json.dumps(s, indent=2))
    else:
        print(f"{s['path']}: {s['entries']} entries, {len(s['corrupt'])} corrupt, "
              f"recorded {s['usd']:.4f} USD")
        for r in s["groups"]:
            print(f"  {r['provider']:<18} {r['model']:<20} {r['prompt_version']:<4} "
                  f"entries {r.get('entries', 0):>6}  answered {r.get('answered', 0):>6}  "
                  f"valid {r.get('valid', 0):>6}  failed {r.get('failed', 0):>4}  "
                  f"usd {r.get('usd', 0.0):.4f}")
        for key in s["corrupt"]:
            print(f"  corrupt: {key}")
    return 1 if s["corrupt"] else 0
