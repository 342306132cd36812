"""``ma validate``: the realism report of a config over blocks of seeds (and of PAMS's CI2002
market beside it)."""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from market_agents.commands import out_dir
from market_agents.config import MAX_SEED, MAX_SEEDS, load_config
from market_agents.inputs import int_in

# PAMS 0.3.0 needs numpy < 2, so its market runs in an environment of its own (as in
# `make bench`); the script prints the price paths as JSON.
PAMS = ["uv", "run", "--quiet", "--no-project", "--with", "pams==0.3.0", "python"]
PAMS_SCRIPT = Path(__file__).resolve().parents[1] / "analysis" / "pams_ci2002.py"
# Every seed's per-tick series come back to the parent process for the figures: 200,000 ticks
# of a 100-seed block is a few GB at most.
MAX_TICKS = 200_000


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ma validate`` and its arguments to the ``ma`` subcommands."""
    p = sub.add_parser(
        "validate",
        help="is the market realistic? the realism report over seed blocks",
        description="Simulate CONFIG (no LLM traders unless the config has them) on BLOCKS "
        "blocks of SEEDS seeds and print the realism report, one column per block: acf of "
        "mid-price returns at lags 1-20 against the white-noise band and the Ljung-Box test "
        "(lags 1-10), acf of |r| to lag 100 raw (unchanged prices dropped) and "
        "deseasonalised with a power-law decay fit, excess kurtosis at 1, 5, 20 and 100 "
        "ticks, the Hill tail index with its standard error, the volume-volatility "
        "correlation, the mispricing against V and against V^pub (quantiles, share of ticks "
        "beyond 5 % outside the 50 ticks after each shock, longest episode), the signed "
        "premium P/V^pub - 1, the excess over the value null (ticks beyond 5 % of V where "
        "V^pub is within 5 % of V) and each trader type's holdings of shares and cash with "
        "its lowest mean. Predictability, tails and short-lag clustering are judged on runs "
        "of at most 1,000 ticks, long-lag clustering, aggregation and the premium on runs of "
        "at least 5,000 (--ticks), value and holdings always. With --out, report.json and one "
        "figure per "
        "fact; with --pams, PAMS's CI2002 market on the same measures beside ours. Exit code "
        "1 when a judged target is missed, each miss named.",
    )
    p.add_argument("config", nargs="?", default="config/baseline.yaml")
    p.add_argument("--design", default=None, metavar="DESIGN",
                   help="simulate DESIGN's base instead of CONFIG: its base config with its "
                   "design-level overrides, no cell's (e.g. config/designs/confirmatory.yaml "
                   "for the confirmatory base, its shocks included)")
    p.add_argument("--seeds", type=int_in(1, MAX_SEEDS), default=20,
                   help=f"seeds per block (default 20, at most {MAX_SEEDS:,})")
    p.add_argument("--first-seed", type=int_in(0, MAX_SEED), default=1)
    p.add_argument("--blocks", type=int_in(1, 100), default=1,
                   help="blocks of consecutive seeds, one column each (default 1)")
    p.add_argument("--ticks", type=int_in(100, MAX_TICKS), default=None,
                   help="run length in ticks (default: the config's simulation.ticks)")
    p.add_argument("--workers", type=int_in(1, 256), default=2, help="parallel processes")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="write report.json and the figures (acf, kurtosis, mispricing, "
                   "holdings) here")
    p.add_argument("--pams", action="store_true",
                   help="add PAMS 0.3.0's CI2002 market (same ticks and seeds) as a column; "
                   "needs uv and PyPI the first time")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=main)


def market_config(path: str, sets: list[str], design: str | None = None) -> Any:
    """The config ``ma validate`` simulates: ``path`` with ``sets`` applied, or with a design,
    the design's base (``protocol.facts.base_config``: its base config and design-level
    overrides) with ``sets`` applied.

    Raises:
        ConfigError: a bad config or design, an unknown or bad ``--set`` key.
    """
    if design is None:
        return load_config(path, sets)
    from market_agents.config import apply_overrides, parse_sets, validate
    from market_agents.protocol.design import load_design

    d = load_design(design)
    data = apply_overrides(apply_overrides(d.base, d.overrides, str(d.path)), parse_sets(sets),
                           str(design))
    return validate(data, f"{design}: base")


def _seed_facts(args: tuple[str, list[str], int, str | None]
                ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Simulate one seed and measure it: (run_facts row, holdings relative to start)."""
    from market_agents.analysis.stylized import holdings_of_run, run_facts
    from market_agents.sim.simulation import simulate

    path, sets, seed, design = args
    config = market_config(path, sets, design)
    tables = simulate(config, seed, progress=False)
    ticks = tables["ticks"].filter(tables["ticks"]["asset"] == 0)
    held, starts = holdings_of_run(config, tables)
    row = run_facts(ticks["mid_price"].to_numpy(), ticks["fundamental"].to_numpy(),
                    ticks["volume"].to_numpy().astype(float), config.simulation.burn_in,
                    [s.time for s in config.shocks], held, starts,
                    ticks["public_value"].to_numpy(), calendar(config))
    relative = {kind: {k: (held[kind][k] / starts[kind][k]).tolist()
                       for k in ("shares", "cash") if starts[kind][k] > 0}
                for kind in held}
    return row, relative


def calendar(config: Any) -> int:
    """The market's calendar period in ticks: news releases every ``news_interval`` ticks and
    every trader's decisions every ``decision_interval`` ticks (phase cohorts of unequal size),
    so |r| repeats with the least common multiple of the two."""
    return math.lcm(config.fundamentals.news_interval, config.simulation.decision_interval)


def _pams_rows(ticks: int, seeds: list[int], burn_in: int) -> list[dict[str, Any]]:
    """PAMS's CI2002 market on ``seeds`` for ``ticks`` steps, measured like ours."""
    import numpy as np

    from market_agents.analysis.stylized import run_facts
    from market_agents.errors import ConfigError

    cmd = [*PAMS, str(PAMS_SCRIPT), str(ticks), *map(str, seeds)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise ConfigError("--pams: uv is not on PATH (`python -m pip install uv`)") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ConfigError(f"--pams: PAMS's CI2002 run failed: {last}")
    rows = []
    for line in done.stdout.splitlines():
        if not line.startswith("{"):  # PAMS prints its timings to standard output
            continue
        run = json.loads(line)
        rows.append(run_facts(np.array(run["mid"]), np.array(run["fundamental"]),
                              np.array(run["volume"], dtype=float), burn_in, []))
    return rows


def _mean_holdings(rels: list[dict[str, Any]]) -> dict[str, dict[str, list[float]]]:
    import numpy as np

    out: dict[str, dict[str, list[float]]] = {}
    for kind in rels[0]:
        out[kind] = {k: np.mean([r[kind][k] for r in rels], 0).tolist() for k in rels[0][kind]}
    return out


def _jsonable(summary: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(summary, default=float))


def main(args: argparse.Namespace) -> int:
    """Simulate a config over blocks of seeds and print its realism report.

    Args:
        args: the parsed arguments of ``ma validate`` (``ma validate --help`` lists them).

    Returns:
        The exit code: 0 when every judged target is met in every block of our market,
        else 1 (PAMS's column is reported, not judged).

    Raises:
        ConfigError: seeds out of range, a bad config, an unwritable ``--out``, a failed
        PAMS run.

    Protocol:
        None (calibration of the control market, docs/market.md; issue 23).
    """
    from market_agents.analysis import stylized
    from market_agents.atomic import write_text_atomic
    from market_agents.errors import ConfigError

    last = args.first_seed + args.seeds * args.blocks - 1
    if last > MAX_SEED:
        raise ConfigError(f"--first-seed {args.first_seed} --seeds {args.seeds} --blocks "
                          f"{args.blocks}: the last seed is past {MAX_SEED}")
    sets = list(args.sets) + ([f"simulation.ticks={args.ticks}"] if args.ticks else [])
    config = market_config(args.config, sets, args.design)  # fail fast on a bad config
    ticks = config.simulation.ticks
    out = out_dir(args.out)
    seeds = list(range(args.first_seed, last + 1))
    jobs = [(args.config, sets, s, args.design) for s in seeds]
    # spawn, not fork: a forked child can inherit polars' thread pool locked and hang.
    ctx = multiprocessing.get_context("spawn")
    what = f"the base of {args.design}" if args.design else args.config
    print(f"simulating {len(seeds)} seeds x {ticks:,} ticks of {what} ...",
          file=sys.stderr)
    with ProcessPoolExecutor(max_workers=max(1, args.workers), mp_context=ctx) as pool:
        results = list(pool.map(_seed_facts, jobs))
    blocks: dict[str, list[dict[str, Any]]] = {}
    holdings: dict[str, dict[str, dict[str, list[float]]]] = {}
    for b in range(args.blocks):
        chunk = results[b * args.seeds:(b + 1) * args.seeds]
        label = f"seeds {seeds[b * args.seeds]}-{seeds[(b + 1) * args.seeds - 1]}"
        blocks[label] = [row for row, _ in chunk]
        holdings[label] = _mean_holdings([rel for _, rel in chunk])
    summaries = {label: stylized.report(rows, ticks) for label, rows in blocks.items()}
    judged_labels = list(summaries)
    if args.pams:
        print(f"PAMS CI2002: {args.seeds} seeds x {ticks:,} steps ...", file=sys.stderr)
        rows = _pams_rows(ticks, seeds[:args.seeds], config.simulation.burn_in)
        blocks["PAMS CI2002"] = rows
        summaries["PAMS CI2002"] = stylized.report(rows, ticks)
    if out is not None:
        from market_agents.analysis.figures import realism_figures

        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"--out {out}: cannot create it ({exc.strerror})") from None
        realism_figures(blocks, out, holdings)
        write_text_atomic(out / "report.json", json.dumps(
            {"config": args.config, "design": args.design, "sets": sets, "ticks": ticks,
             "columns": _jsonable(summaries)}, indent=2) + "\n")
    missed = {label: stylized.misses(summaries[label]) for label in judged_labels}
    if args.json:
        print(json.dumps(_jsonable(summaries), indent=2))
    else:
        _print_table(args, ticks, summaries)
    for label, names in missed.items():
        for name in names:
            check = summaries[label]["checks"][name]
            # With --json, standard output stays one JSON document.
            print(f"miss: {label}: {name} = {check['value']:.4g} ({check['text']})",
                  file=sys.stderr if args.json else sys.stdout)
    return 1 if any(missed.values()) else 0


def _print_table(args: argparse.Namespace, ticks: int, summaries: dict[str, Any]) -> None:
    labels = list(summaries)
    width = max(16, *(len(x) + 2 for x in labels))
    what = f"the base of {args.design}" if args.design else args.config
    print(f"realism report of {what}: {ticks:,} ticks, mid-price log returns after "
          f"the burn-in (medians over seeds unless 'worst')")
    print(f"{'measure':<32}" + "".join(f"{x:>{width}}" for x in labels))
    keys = list(dict.fromkeys(k for s in summaries.values() for k in s["values"]))
    for key in keys:
        cells = [s["values"].get(key) for s in summaries.values()]
        print(f"{key:<32}" + "".join(f"{'-':>{width}}" if c is None else f"{c:>{width}.4g}"
                                     for c in cells))
    print()
    print(f"{'target':<32}" + "".join(f"{x:>{width}}" for x in labels))
    for name in summaries[labels[0]]["checks"]:
        cells = []
        for s in summaries.values():
            c = s["checks"][name]
            mark = "n/a" if c["ok"] is None else "ok" if c["ok"] else "MISS"
            cells.append(f"{'-' if c['value'] is None else format(c['value'], '.3g')} {mark}")
        print(f"{name:<32}" + "".join(f"{c:>{width}}" for c in cells))
    print()
    for name, c in summaries[labels[0]]["checks"].items():
        print(f"  {name}: {c['text']}" + ("" if c["judged"] else " (not judged at this "
                                                                "horizon)"))
