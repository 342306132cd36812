"""Contract entry point: ``python -m src.main --run-id RUN_ID --mode MODE`` checks the run may
start (pilot and full: declared in the committed .research/record.json), runs its Snakemake
target and writes its raw evaluation inputs to ``eval_inputs/`` (.research/results/<run_id>/, or
results/sanity/<run_id>/ for a sanity run); an earlier execution there is kept under
``executions/<execution_id>/`` and named in one line. All logic lives in
``market_agents.pipeline.contract``; docs/contract.md describes the contract."""

import argparse
import sys
from pathlib import Path

from market_agents import layout
from market_agents.errors import MarketAgentsError
from market_agents.pipeline.contract import (
    MODES,
    SANITY_LINE,
    execute,
    executions_note,
    load_run_spec,
)


def main(argv: list[str] | None = None) -> int:
    """Run ``python -m src.main``: check the run may start, run its Snakemake target and write
    its ``eval_inputs/``.

    Args:
        argv: ``--run-id RUN_ID [--mode sanity|pilot|full] [--workdir DIR]``.

    Returns:
        The exit code: 0, or 2 with one line on stderr (and the sanity FAIL line in a sanity
        run) when the run is refused or fails.
    """
    p = argparse.ArgumentParser(prog="python -m src.main", description=__doc__)
    p.add_argument("--run-id", required=True, help="config/run/<run_id>.yaml")
    p.add_argument("--mode", default="sanity", choices=MODES)
    p.add_argument("--workdir", type=Path, default=Path("."),
                   help=f"project directory holding config/, .research/ and {layout.ROOT}/ "
                   "(default: here)")
    args = p.parse_args(argv)
    try:
        out = execute(load_run_spec(args.run_id, args.workdir), args.mode, args.workdir)
    except MarketAgentsError as exc:
        print(f"src.main: error: {exc}", file=sys.stderr)
        if args.mode == "sanity":
            print(f"{SANITY_LINE} FAIL reason={exc}")
        return 2
    print(f"eval inputs -> {out / 'eval_inputs'}")
    note = executions_note(out)
    if note:  # the contract: tell the user the other executions exist
        print(note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
