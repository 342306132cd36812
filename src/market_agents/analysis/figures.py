"""Figures from saved files only (nothing is re-simulated): one run's price path, and one
outcome across the cells of a design."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl

from market_agents.atomic import write_atomic
from market_agents.errors import ConfigError
from market_agents.sim.rundir import MANIFEST_FILE, table_file


def _pyplot():
    # why: matplotlib takes ~0.5 s to load; only a command that draws needs it
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt  # why: after use("Agg"), which must come first

    return plt


def run_figure(run_dir: str | Path, out: str | Path, asset: int = 0) -> Path:
    """Mid price against V and V^pub, with shocks, halts and margin calls marked, and volume
    below (:func:`price_figure` of the run's saved files), written to ``out``."""
    run_dir, out = Path(run_dir), Path(out)
    try:
        ticks = pl.read_parquet(run_dir / table_file("ticks"))
        manifest = json.loads((run_dir / MANIFEST_FILE).read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{run_dir}: not a complete run directory ({exc})") from None
    if ticks.filter(pl.col("asset") == asset).is_empty():
        raise ConfigError(f"{run_dir}: no ticks for asset {asset}")
    n_llm = manifest.get("n_llm_agents", 0)
    title = (f"{run_dir.parent.name}/{run_dir.name}: seed {manifest.get('seed')}, "
             f"{n_llm} LLM traders (dashed: shocks; red: halts; markers: mechanisms' events)")
    plt = _pyplot()
    return _save(price_figure(ticks, manifest, title, asset), out, plt)


def price_figure(ticks: pl.DataFrame, manifest: dict, title: str, asset: int = 0):
    """The price-path figure of one run from its ticks table and manifest (a matplotlib Figure):
    mid price, V (hidden) and V^pub (public), halts shaded, each mechanism's events (margin
    calls) as markers, shocks
    dashed (placebo orange), volume below.

    Args:
        ticks: the run's ticks.parquet (every asset; ``asset`` is drawn).
        manifest: the run's manifest.json (halts, mechanism_events, shocks).
        title: the figure's title.
        asset: the asset index to draw (0 or 1).
    """
    ticks = ticks.filter(pl.col("asset") == asset).sort("tick")
    plt = _pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6), sharex=True,
                                      gridspec_kw={"height_ratios": [3, 1]})
    t = ticks["tick"].to_numpy()
    top.plot(t, ticks["fundamental"].to_numpy(), color="0.55", lw=1, label="V (hidden)")
    top.step(t, ticks["public_value"].to_numpy(), where="post", color="tab:green", lw=1,
             label="V^pub (public)")
    top.plot(t, ticks["mid_price"].to_numpy(), color="tab:blue", lw=1.2, label="mid price")
    for start, end in manifest.get("halts", []):
        top.axvspan(start, end, color="tab:red", alpha=0.15, lw=0)
    mid = dict(zip(t.tolist(), ticks["mid_price"].to_list(), strict=True))
    for (name, events), marker in zip(sorted(manifest.get("mechanism_events", {}).items()),
                                      "v^<>sDp*", strict=False):
        at = [e[0] for e in events if e[0] in mid]
        top.plot(at, [mid[c] for c in at], marker, ms=6, label=f"{name} ({len(at)})")
    for shock in manifest.get("shocks", []):
        top.axvline(shock["time"], color="tab:orange" if shock["kind"] == "placebo" else "k",
                    ls="--", lw=0.8)
    top.set_ylabel("price")
    top.legend(loc="best", fontsize=8)
    top.set_title(title, fontsize=10)
    # one line per tick in a single collection: 600 bar patches cost 20x the drawing time
    bottom.vlines(t, 0, ticks["volume"].to_numpy(), color="0.4", lw=1)
    bottom.set_ylabel("volume")
    bottom.set_xlabel("tick")
    return fig


def design_figure(outcomes: str | Path, outcome: str, out: str | Path) -> Path:
    """One outcome per cell: every seed as a dot, the cell mean as a bar."""
    outcomes, out = Path(outcomes), Path(out)
    try:
        table = pl.read_parquet(outcomes)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise ConfigError(f"{outcomes}: cannot read the outcomes table ({exc})") from None
    if outcome not in table.columns:
        raise ConfigError(f"--outcome {outcome}: not a column of {outcomes} "
                          f"(try one of: volatility, mispricing, rad, n_bubbles, reject_ratio)")
    cells = table["cell"].unique(maintain_order=True).to_list()
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(cells) + 2), 4))
    for i, cell in enumerate(cells):
        values = table.filter(pl.col("cell") == cell)[outcome].drop_nulls().to_numpy()
        if len(values):
            ax.bar(i, values.mean(), color="tab:blue", alpha=0.35)
            ax.plot([i] * len(values), values, "o", color="tab:blue", ms=4)
    ax.set_xticks(range(len(cells)), cells, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel(outcome)
    ax.set_title(f"{outcome} by cell ({outcomes.parent.name}; dots: seeds, bars: means)",
                 fontsize=10)
    return _save(fig, out, plt)


def _save(fig, out: Path, plt) -> Path:
    fig.tight_layout()
    try:
        write_atomic(out, lambda fh: fig.savefig(fh, dpi=120, format=out.suffix.lstrip(".")
                                                 or "png"))
    finally:
        plt.close(fig)
    return out


def realism_figures(blocks: dict[str, list[dict]], out_dir: str | Path,
                    holdings: dict[str, dict[str, dict[str, list[float]]]] | None = None
                    ) -> list[Path]:
    """The realism report's figures, one per fact, from the per-seed rows of
    :func:`market_agents.analysis.stylized.run_facts` grouped by column (a seed block of our
    market, or PAMS's CI2002 market).

    Args:
        blocks: column label -> its rows.
        out_dir: the folder the PNG files are written to (created).
        holdings: column label -> type -> ``{"shares", "cash"}``: the type's mean holding per
            tick relative to its start, averaged over the block's seeds, or None.

    Returns:
        The files written: ``acf.png`` (median acf of returns, lags 1–20, with the white-noise
        band; median acf of |r| to lag 100 on log axes), ``kurtosis.png`` (median excess
        kurtosis against the aggregation scale), ``mispricing.png`` (|P/V − 1| per tick: the
        median and the worst seed), ``holdings.png`` (each type's holdings over time).
    """
    # why: stylized loads the engine (sim.simulation); only the realism report draws these
    from market_agents.analysis import realism, stylized

    out_dir = Path(out_dir)
    plt = _pyplot()
    written = []
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4))
    for label, rows in blocks.items():
        lags = np.arange(1, stylized.ACF_LAGS + 1)
        ax.plot(lags, np.median([r["acf"] for r in rows], 0), "o-", ms=3, label=label)
        abs_lags = np.arange(1, stylized.ABS_ACF_LAGS + 1)
        med = np.median([r["abs_acf"] for r in rows], 0)
        # Markers, not a line: a log axis cannot show the lags where the acf is <= 0.
        bx.plot(abs_lags[med > 0], med[med > 0], "o", ms=2.5, label=label)
    n = int(np.median([r["n"] for rows in blocks.values() for r in rows]))
    band = realism.white_noise_band(n)
    ax.axhspan(-band, band, color="grey", alpha=0.2, label=f"white-noise band (n = {n:,})")
    ax.axhline(0, color="black", lw=0.5)
    ax.set(xlabel="lag (ticks)", ylabel="median acf of returns",
           title="returns: no linear predictability")
    bx.axhline(band, color="grey", ls="--", label="white-noise band")
    bx.set(xscale="log", yscale="log", xlabel="lag (ticks)",
           ylabel="median acf of |r| (deseasonalized)",
           title="clustering (log-log; acf <= 0 not shown)")
    from matplotlib.ticker import MaxNLocator  # why: matplotlib loads only to draw

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=7)
    bx.legend(fontsize=7)
    written.append(_save(fig, out_dir / "acf.png", plt))

    fig, ax = plt.subplots(figsize=(6, 4))
    scales = list(realism.AGGREGATION_SCALES)
    for label, rows in blocks.items():
        ax.plot(scales, [stylized.median_or_nan([r["kurtosis"][s] for r in rows])
                         for s in scales], "o-", label=label)
    ax.axhline(0, color="black", lw=0.5)
    ax.set(xscale="log", xlabel="aggregation scale (ticks)", ylabel="median excess kurtosis",
           title="aggregational Gaussianity")
    ax.legend(fontsize=7)
    written.append(_save(fig, out_dir / "kurtosis.png", plt))

    fig, ax = plt.subplots(figsize=(9, 4))
    for label, rows in blocks.items():
        length = min(len(r["mispricing_path"]) for r in rows)
        paths = np.array([r["mispricing_path"][:length] for r in rows])
        worst = int(np.argmax([r["mispricing"]["max"] for r in rows]))
        line, = ax.plot(paths[worst], lw=0.5, alpha=0.8, label=f"{label}: worst seed")
        ax.plot(np.median(paths, 0), lw=0.8, color="black" if len(blocks) == 1 else
                line.get_color(), label=f"{label}: median over seeds, per tick")
    ax.axhline(stylized.GAP, color="red", ls="--", lw=0.8, label="5 %")
    ax.set(xlabel="tick after burn-in", ylabel="|P/V - 1|", title="mispricing over time")
    ax.legend(fontsize=7)
    written.append(_save(fig, out_dir / "mispricing.png", plt))

    if holdings:
        fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.5))
        kinds_all = sorted({k for kinds in holdings.values() for k in kinds})
        colours = {k: f"C{i}" for i, k in enumerate(kinds_all)}  # one colour per type
        styles = ["-", "--", ":", "-."]  # one line style per block
        for b, (label, kinds) in enumerate(holdings.items()):
            for kind, series in kinds.items():
                style = dict(color=colours[kind], ls=styles[b % len(styles)], lw=0.8,
                             label=f"{label}: {kind}")
                if "shares" in series:
                    ax.plot(series["shares"], **style)
                if "cash" in series:
                    bx.plot(series["cash"], **style)
        for x, what in ((ax, "shares"), (bx, "cash")):
            x.axhline(stylized.HOLDING_FLOOR, color="red", ls="--", lw=0.8, label="10 % floor")
            x.set(xlabel="tick", ylabel=f"mean {what} / start (block mean over seeds)",
                  title=f"{what} held, by type")
            x.legend(fontsize=7, ncol=2)
        written.append(_save(fig, out_dir / "holdings.png", plt))
    return written
