"""``ma cache``: what an LLM response cache (the record of an experiment, and the decision
library) holds; ``ma cache verify`` checks it entry by entry; ``ma cache retry-failures``
removes recorded failures so a deliberate re-run fetches them again."""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from market_agents.errors import ConfigError

ACTIONS = ("summary", "verify", "retry-failures")


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ma cache`` and its arguments to the ``ma`` subcommands."""
    p = sub.add_parser(
        "cache",
        help="summarize, verify or re-open failures of an LLM response cache",
        usage="ma cache [summary|verify|retry-failures] PATH [--json] [--dry-run]",
        description="`ma cache PATH` (or `ma cache summary PATH`) counts the entries by "
        "provider, model and prompt version: answered and failed calls, valid decisions, "
        "tokens, recorded USD and answers that came without token usage (charged at their "
        "worst case). `ma cache verify PATH` checks the sqlite file and every "
        "entry's checksum and lists the keys of entries that fail (exit 1), and the pending "
        "claims of processes that stopped mid-call. `ma cache retry-failures PATH` removes the "
        "recorded failures (calls that failed after their retries) so a deliberate re-run "
        "fetches them again, printing how many and their planned USD. A damaged sqlite file, "
        "a path that is not a cache directory or an unreadable one: one line, exit 2.",
    )
    p.add_argument("target", nargs="+", metavar="[ACTION] PATH",
                   help="cache directory, e.g. results/cache/pilot_openai.sqlite, after an "
                   f"optional action ({', '.join(ACTIONS)}; default summary)")
    p.add_argument("--json", action="store_true", help="print JSON for machines")
    p.add_argument("--dry-run", action="store_true",
                   help="retry-failures: print what would be removed, remove nothing")
    p.set_defaults(func=main)


def _open(path: str | Path):
    from market_agents.llm.cache import ResponseCache

    return ResponseCache(path, readonly=True)


def summarize(path: str | Path) -> dict:
    """Count a cache's entries by (provider, model, prompt version), verifying each.

    Args:
        path: the cache directory.

    Returns:
        ``{"path", "entries", "corrupt": [keys], "groups": [rows], "usd"}``: per group the
        entries, answered, valid and failed counts, tokens, recorded USD and
        ``usage_missing`` (paid answers that came without token usage, each recorded at its
        worst case).

    Raises:
        CacheError: not a cache, or a damaged sqlite file.
    """
    from market_agents.llm.calls import is_valid_entry

    path = Path(path)
    cache = _open(path)
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
            # paid answers without token usage, recorded at their worst case (docs/cache.md)
            g["usage_missing"] += bool(body.get("usage_missing"))
        else:
            g["failed"] += 1
    rows = [{"provider": p, "model": m, "prompt_version": v}
            | {k: (round(x, 8) if k == "usd" else int(x)) for k, x in sorted(g.items())}
            for (p, m, v), g in sorted(groups.items())]
    return {"path": str(path), "entries": len(good) + len(bad), "corrupt": bad, "groups": rows,
            "usd": round(sum(r.get("usd", 0.0) for r in rows), 8)}


def verify(path: str | Path) -> dict:
    """{"path", "entries", "bad": [keys], "claims": [pending claims]}."""
    cache = _open(path)
    try:
        good, bad = cache.scan()
        claims = cache.claims()
    finally:
        cache.close()
    return {"path": str(path), "entries": len(good) + len(bad), "bad": bad,
            "claims": claims}


def retry_failures(path: str | Path, dry_run: bool = False) -> dict:
    """Remove (or, ``dry_run``, list) the entries of calls that failed after their retries.

    Args:
        path: an existing cache directory.
        dry_run: list what would be removed, remove nothing.

    Returns:
        ``{"path", "failures", "removed", "by_class", "planned_usd", "dry_run"}``: the planned
        USD of re-fetching them at the planning token profile of each model.

    Raises:
        CacheError: not a cache (a missing path included, with or without ``dry_run``: nothing
            is created there), or a damaged one.
    """
    from market_agents.llm.cache import ResponseCache
    from market_agents.llm.pricing import load_prices
    from market_agents.pipeline.workflow_config import WorkflowConfig

    # Opened read-only first, so that a path that is not a cache is refused before anything
    # is created: opened for writing, a mistyped path became a new, empty cache and the
    # command said it removed 0 failures (issue 25).
    cache = _open(path)
    if not dry_run:
        cache.close()
        cache = ResponseCache(path)
    prices, profile = load_prices(), WorkflowConfig()  # the protocol's planning profile
    try:
        good, _ = cache.scan()
        failed = [(k, b) for k, b in good if b.get("status") == "failed"]
        planned = 0.0
        classes: dict[str, int] = defaultdict(int)
        for _, body in failed:
            model = body.get("request", {}).get("model", "")
            if model in prices.models:
                planned += prices.planned_cost(model, profile.tokens_in, profile.tokens_out)
            classes[body.get("error_class") or "failed"] += 1
        removed = 0 if dry_run else cache.delete([k for k, _ in failed])
    finally:
        cache.close()
    return {"path": str(path), "failures": len(failed), "removed": removed,
            "by_class": dict(sorted(classes.items())), "planned_usd": round(planned, 8),
            "dry_run": dry_run}


def main(args: argparse.Namespace) -> int:
    """Summarize, verify, or re-open the failures of an LLM response cache (docs/cache.md).

    Args:
        args: the parsed arguments of ``ma cache`` (``ma cache --help`` lists them).

    Returns:
        The exit code: 0; 1 when the cache holds corrupt entries (summary) or entries that fail
            their check (verify).

    Raises:
        ConfigError: an unknown action.
        CacheError: not a cache, or a damaged one.

    Protocol:
        Run protocol §1 (the cache is the record and the decision library) and §6 (replay at zero
        USD).
    """
    target = args.target
    if len(target) == 1:
        action, path = "summary", target[0]
    elif len(target) == 2 and target[0] in ACTIONS:
        action, path = target
    else:
        raise ConfigError(f"ma cache {' '.join(target)}: expected [ACTION] PATH with ACTION one "
                          f"of {', '.join(ACTIONS)}")
    if action == "verify":
        return _print_verify(verify(path), args.json)
    if action == "retry-failures":
        r = retry_failures(path, args.dry_run)
        if args.json:
            print(json.dumps(r, indent=2))
        else:
            verb = "would remove" if args.dry_run else "removed"
            classes = ", ".join(f"{k} {v}" for k, v in r["by_class"].items()) or "none"
            print(f"{r['path']}: {verb} {r['failures']} recorded failure(s) ({classes}); "
                  f"re-fetching them costs about {r['planned_usd']:.4f} USD at the planning "
                  "profile (760 in / 230 out per call)")
        return 0
    s = summarize(path)
    if args.json:
        print(json.dumps(s, indent=2))
    else:
        print(f"{s['path']}: {s['entries']} entries, {len(s['corrupt'])} corrupt, "
              f"recorded {s['usd']:.4f} USD")
        for r in s["groups"]:
            print(f"  {r['provider']:<18} {r['model']:<20} {r['prompt_version']:<4} "
                  f"entries {r.get('entries', 0):>6}  answered {r.get('answered', 0):>6}  "
                  f"valid {r.get('valid', 0):>6}  failed {r.get('failed', 0):>4}  "
                  f"usd {r.get('usd', 0.0):.4f}"
                  + (f"  usage missing {r['usage_missing']}" if r.get("usage_missing") else ""))
        for key in s["corrupt"]:
            print(f"  corrupt: {key}")
    return 1 if s["corrupt"] else 0


def _print_verify(v: dict, as_json: bool) -> int:
    if as_json:
        print(json.dumps(v, indent=2))
    else:
        state = "ok" if not v["bad"] else f"{len(v['bad'])} bad"
        print(f"{v['path']}: {v['entries']} entries, {state}; {len(v['claims'])} pending "
              "claim(s)")
        for key in v["bad"]:
            print(f"  bad: {key}")
        for c in v["claims"]:
            print(f"  claim: {c['key']} (pid {c.get('pid')} on {c.get('host')})")
    return 1 if v["bad"] else 0
