"""Contract evaluation: ``python -m src.evaluate --run-id RUN_ID --mode MODE`` reads
results/contract/<run_id>/<mode>/eval_inputs/ and writes metrics.json beside it."""

import argparse
import sys
from pathlib import Path

from market_agents.atomic import json_text, write_text_atomic
from market_agents.errors import MarketAgentsError
from market_agents.pipeline.contract import evaluate, load_run_spec, run_dir


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m src.evaluate", description=__doc__)
    p.add_argument("--run-id", required=True)
    p.add_argument("--mode", default="sanity", choices=["sanity", "pilot", "full"])
    p.add_argument("--workdir", type=Path, default=Path("."))
    args = p.parse_args(argv)
    try:
        spec = load_run_spec(args.run_id, args.workdir)
        out = args.workdir / run_dir(spec, args.mode)
        metrics = evaluate(spec, out)
        write_text_atomic(out / "metrics.json", json_text(metrics, indent=2))
    except MarketAgentsError as exc:
        print(f"src.evaluate: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a full disk, a lost permission: atomic names the file
        print(f"src.evaluate: error: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    print(f"metrics -> {out / 'metrics.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
