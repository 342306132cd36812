"""Contract evaluation: ``python -m src.evaluate --run-id RUN_ID --mode MODE`` scores the run's
``eval_inputs/`` with the run config's tasks (or every task type in .research/evaluation.json),
writes ``metrics.json`` and ``evaluation.md`` beside them and declares the directory in
``.provenance.json``. A sanity run ends with ``SANITY_VALIDATION: PASS`` or ``FAIL reason=…``."""

import argparse
import sys
from pathlib import Path

from market_agents.errors import MarketAgentsError
from market_agents.pipeline.contract import (
    MODES,
    SANITY_LINE,
    evaluate_run,
    executions_note,
    load_run_spec,
)


def main(argv: list[str] | None = None) -> int:
    """Run ``python -m src.evaluate``: score a run's ``eval_inputs/`` into metrics.json and
    evaluation.md, and declare them in .provenance.json.

    Args:
        argv: ``--run-id RUN_ID [--mode sanity|pilot|full] [--workdir DIR]``.

    Returns:
        The exit code: 0; 1 for a sanity run that fails its validation; 2 with one line on
        stderr when the evaluation cannot run.
    """
    p = argparse.ArgumentParser(prog="python -m src.evaluate", description=__doc__)
    p.add_argument("--run-id", required=True)
    p.add_argument("--mode", default="sanity", choices=MODES)
    p.add_argument("--workdir", type=Path, default=Path("."))
    args = p.parse_args(argv)
    try:
        out, failure = evaluate_run(load_run_spec(args.run_id, args.workdir), args.mode,
                                    args.workdir)
    except MarketAgentsError as exc:
        print(f"src.evaluate: error: {exc}", file=sys.stderr)
        if args.mode == "sanity":
            print(f"{SANITY_LINE} FAIL reason={exc}")
        return 2
    except OSError as exc:  # a full disk, a lost permission: atomic names the file
        print(f"src.evaluate: error: {exc.filename}: {exc.strerror}", file=sys.stderr)
        if args.mode == "sanity":
            print(f"{SANITY_LINE} FAIL reason={exc.filename}: {exc.strerror}")
        return 2
    print(f"metrics -> {out / 'metrics.json'}; report -> {out / 'evaluation.md'}")
    note = executions_note(out)
    if note:  # the contract: declare which execution is reported, say the others exist
        print(note)
    if args.mode == "sanity":
        print(f"{SANITY_LINE} PASS" if failure is None else f"{SANITY_LINE} FAIL reason={failure}")
        return 0 if failure is None else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
