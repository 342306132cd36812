"""The run contract (``make run RUN_ID=… MODE=sanity|pilot|full``): a run config
``config/run/<run_id>.yaml`` names a Snakemake target and the designs whose outcomes are the
run's raw evaluation inputs; ``src/main.py`` runs the target and copies those inputs to
``eval_inputs/``, ``src/evaluate.py`` turns them into ``metrics.json``.

Modes: ``sanity`` runs the target on the tiny test designs (config/test/workflow.yaml), ``pilot``
on the first seed of every cell, ``full`` as configured; a run config may override each.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

import polars as pl
from pydantic import Field, ValidationError

from market_agents.config import read_yaml
from market_agents.core import Strict, validation_message
from market_agents.errors import ConfigError
from market_agents.pipeline.workflow_config import DEFAULTS

Mode = Literal["sanity", "pilot", "full"]
TASKS = ("cell_means", "effects_vs_control")
DEFAULT_MODES: dict[str, dict[str, Any]] = {
    "sanity": {"configfile": "config/test/workflow.yaml", "config": {}},
    "pilot": {"configfile": None, "config": {"max_seeds": 1}},
    "full": {"configfile": None, "config": {}},
}


class ModeSpec(Strict):
    configfile: str | None = None
    config: dict[str, Any] = Field(default_factory=dict)


class RunSpec(Strict):
    run_id: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    target: str = Field(description="Snakemake target, e.g. exploratory or tier_T1")
    designs: list[str] = Field(min_length=1, description="designs whose outcomes are inputs")
    tasks: list[Literal["cell_means", "effects_vs_control"]] = Field(
        default_factory=lambda: list(TASKS))
    control: str = Field(default=DEFAULTS.control, description="control cell of the effects")
    cores: int = Field(default=2, ge=1)
    modes: dict[Mode, ModeSpec] = Field(default_factory=dict)

    def mode(self, mode: str) -> ModeSpec:
        if mode not in DEFAULT_MODES:
            raise ConfigError(f"MODE={mode!r}: use sanity, pilot or full")
        return self.modes.get(mode) or ModeSpec(**DEFAULT_MODES[mode])  # type: ignore[index]


def load_run_spec(run_id: str, root: Path = Path(".")) -> RunSpec:
    path = root / "config" / "run" / f"{run_id}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in (root / "config" / "run").glob("*.yaml"))
        raise ConfigError(f"RUN_ID={run_id!r}: no {path} (runs: {', '.join(known) or 'none'})")
    raw = read_yaml(path)
    try:
        spec = RunSpec.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {validation_message(exc, raw)}") from None
    if spec.run_id != run_id:
        raise ConfigError(f"{path}: run_id {spec.run_id!r} differs from the file name")
    return spec


def run_dir(spec: RunSpec, mode: str, root: Path = Path("results/contract")) -> Path:
    return root / spec.run_id / mode


def snakemake_command(spec: RunSpec, mode: str, directory: Path | None = None) -> list[str]:
    m = spec.mode(mode)
    snakefile = Path(__file__).resolve().parents[3] / "Snakefile"
    cmd = [str(Path(sys.executable).parent / "snakemake"), "-s", str(snakefile), spec.target,
           "--cores", str(spec.cores)]
    if directory is not None:
        cmd += ["--directory", str(directory)]
    if m.configfile:
        cmd += ["--configfile", m.configfile]
    if m.config:
        cmd += ["--config", *(f"{k}={json.dumps(v)}" for k, v in m.config.items())]
    return cmd


def execute(spec: RunSpec, mode: str, workdir: Path = Path(".")) -> Path:
    """Run the target, then copy each design's outcomes.parquet into eval_inputs/."""
    cmd = snakemake_command(spec, mode, workdir)
    done = subprocess.run(cmd)
    if done.returncode != 0:
        raise ConfigError(f"snakemake {spec.target} failed (exit {done.returncode}); see its "
                          "output above; after a kill run `make unlock TARGET=…` first")
    out = workdir / run_dir(spec, mode)
    inputs = out / "eval_inputs"
    if inputs.exists():
        shutil.rmtree(inputs)
    inputs.mkdir(parents=True)
    for design in spec.designs:
        src = workdir / "results" / "runs" / design / "outcomes.parquet"
        if not src.exists():
            raise ConfigError(f"{src} does not exist: target {spec.target!r} does not produce "
                              f"design {design!r}; fix designs in config/run/{spec.run_id}.yaml")
        shutil.copy2(src, inputs / f"{design}.parquet")
    (out / "run.json").write_text(json.dumps(
        {"run_id": spec.run_id, "mode": mode, "target": spec.target, "command": cmd[1:]},
        indent=2) + "\n")
    return out


def _finite(x: Any) -> float | None:
    return float(x) if x is not None and math.isfinite(float(x)) else None


def evaluate(spec: RunSpec, out: Path) -> dict[str, Any]:
    """metrics.json from eval_inputs/: per design, cell means of every numeric outcome and
    paired differences vs the control over shared seeds (mean, SD, n)."""
    from market_agents.analysis.stats import PRIMARY_OUTCOMES, paired_differences

    inputs = out / "eval_inputs"
    if not inputs.exists():
        raise ConfigError(f"{inputs} does not exist: run `make run RUN_ID={spec.run_id}` first")
    metrics: dict[str, Any] = {"run_id": spec.run_id, "designs": {}}
    for design in spec.designs:
        frame = pl.read_parquet(inputs / f"{design}.parquet")
        numeric = [c for c in frame.columns if frame[c].dtype.is_numeric() and c != "seed"]
        entry: dict[str, Any] = {"runs": frame.height}
        if "cell_means" in spec.tasks:
            means = frame.group_by("cell").agg([pl.len().alias("n_runs"),
                                                *(pl.col(c).mean() for c in numeric)])
            entry["cell_means"] = {
                r["cell"]: {k: _finite(v) if k != "n_runs" else v
                            for k, v in r.items() if k != "cell"}
                for r in means.sort("cell").iter_rows(named=True)}
        if "effects_vs_control" in spec.tasks and spec.control in frame["cell"].to_list():
            diffs = paired_differences(frame, spec.control,
                                       [y for y in PRIMARY_OUTCOMES if y in numeric])
            entry["effects_vs_control"] = {
                cell: {y: d if y == "n_pairs" else {
                    "mean": _finite(d.mean()) if len(d) else None,
                    "sd": _finite(d.std(ddof=1)) if len(d) > 1 else None, "n": len(d)}
                    for y, d in row.items()}
                for cell, row in diffs.items()}
        metrics["designs"][design] = entry
    return metrics
