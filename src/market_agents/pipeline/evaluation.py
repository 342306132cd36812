"""The contract's evaluation (``make evaluate``): the task types of ``.research/evaluation.json``
applied to a run's raw inputs (``eval_inputs/``), giving ``metrics.json`` and the Markdown
evaluation report. ``ma verify`` re-derives metrics.json with the same functions.

Inputs are of two kinds: ``<name>.parquet`` (a design's gathered outcomes, one row per run) and
``<name>.json`` (a protocol manifest). Each task type reads one kind.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from market_agents.analysis import stats
from market_agents.analysis.stats import outcome_columns, paired_differences
from market_agents.errors import ConfigError
from market_agents.protocol.pilot import PRIMARY_OUTCOMES

if TYPE_CHECKING:  # annotations only: polars loads where a table is read or built
    import polars as pl

EVALUATION = Path(".research/evaluation.json")
KINDS = {"outcomes": ".parquet", "manifest": ".json"}


def _finite(x: Any) -> float | None:
    return float(x) if x is not None and math.isfinite(float(x)) else None


def cell_means(frame: pl.DataFrame, control: str) -> dict[str, Any]:
    """Per cell: n_runs and the mean of every numeric outcome."""
    import polars as pl  # why: src.main imports this module, never a table
    numeric = outcome_columns(frame)
    means = frame.group_by("cell").agg([pl.len().alias("n_runs"),
                                        *(pl.col(c).mean() for c in numeric)])
    return {r["cell"]: {k: _finite(v) if k != "n_runs" else v for k, v in r.items() if k != "cell"}
            for r in means.sort("cell").iter_rows(named=True)}


def effects_vs_control(frame: pl.DataFrame, control: str) -> dict[str, Any] | None:
    """Per treated cell and primary outcome: mean, SD and n of the paired differences vs the
    control (None when the control cell is absent)."""
    if control not in frame["cell"].to_list():
        return None
    numeric = outcome_columns(frame)
    diffs = paired_differences(frame, control, [y for y in PRIMARY_OUTCOMES if y in numeric])
    return {cell: {y: d if y == "n_pairs" else {
        "mean": _finite(d.mean()) if len(d) else None,
        "sd": _finite(d.std(ddof=1)) if len(d) > 1 else None, "n": len(d)}
        for y, d in row.items()} for cell, row in diffs.items()}


def control_sd(frame: pl.DataFrame, control: str) -> dict[str, Any] | None:
    """Per outcome of the control cell: n, mean, SD (None when the control cell is absent)."""
    if control not in frame["cell"].to_list():
        return None
    return {r["outcome"]: {"n": r["n"], "mean": _finite(r["mean"]), "sd": _finite(r["sd"])}
            for r in stats.control_sd(frame, control).iter_rows(named=True)}


def manifest_figures(manifest: dict[str, Any], control: str) -> dict[str, Any]:
    """Every number and boolean of a manifest by dotted key (strings, lists and nulls left out)."""
    out: dict[str, Any] = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict):
            for k in sorted(node):
                walk(node[k], f"{prefix}.{k}" if prefix else str(k))
        elif isinstance(node, bool | int | float):
            out[prefix] = _finite(node) if isinstance(node, float) else node

    walk(manifest, "")
    return out


# Task type -> (input kind, function(input, control)). .research/evaluation.json lists the same
# names with their descriptions (a test checks the two agree).
TASKS: dict[str, tuple[str, Callable[[Any, str], Any]]] = {
    "cell_means": ("outcomes", cell_means),
    "effects_vs_control": ("outcomes", effects_vs_control),
    "control_sd": ("outcomes", control_sd),
    "manifest_figures": ("manifest", manifest_figures),
}


def task_types(root: Path = Path(".")) -> dict[str, dict[str, str]]:
    """Name -> {input, description} of every task type ``.research/evaluation.json`` lists;
    ConfigError when the file is missing or lists a type the code does not implement."""
    path = root / EVALUATION
    try:
        listed = json.loads(path.read_text())["task_types"]
    except FileNotFoundError:
        raise ConfigError(f"{path} does not exist: it lists the task types `make evaluate` "
                          "scores") from None
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: expected {{\"task_types\": [{{name, input, "
                          f"description}}]}} ({exc})") from None
    types = {t["name"]: t for t in listed}
    unknown = sorted(set(types) - set(TASKS))
    if unknown:
        raise ConfigError(f"{path}: task types {', '.join(unknown)} are not implemented (known: "
                          f"{', '.join(TASKS)})")
    return types


def read_inputs(directory: Path) -> dict[str, tuple[str, Any]]:
    """Name -> (kind, data) of every file in ``eval_inputs/``."""
    import polars as pl  # why: src.main imports this module, never a table
    if not directory.is_dir():
        raise ConfigError(f"{directory} does not exist: run `make run` first")
    out: dict[str, tuple[str, Any]] = {}
    for path in sorted(directory.iterdir()):
        if path.suffix == KINDS["outcomes"]:
            out[path.stem] = ("outcomes", pl.read_parquet(path))
        elif path.suffix == KINDS["manifest"]:
            out[path.stem] = ("manifest", json.loads(path.read_text()))
    return out


def evaluate(run_id: str, tasks: list[str], control: str, inputs_dir: Path) -> dict[str, Any]:
    """metrics.json of a run: for each input, the result of each task type of its kind.

    Args:
        run_id: the run contract's run id (``config/run/<run_id>.yaml``), for messages.
        tasks: the task types to score (the run config's ``tasks:``, else every listed type).
        control: the control cell of the outcome tasks.
        inputs_dir: the run's ``eval_inputs/``.

    Raises: ConfigError when a task type has no input of its kind (name the run's tasks).
    """
    inputs = read_inputs(inputs_dir)
    for task in tasks:
        kind = TASKS[task][0]
        if not any(k == kind for k, _ in inputs.values()):
            raise ConfigError(f"task {task!r} reads {kind} inputs and {inputs_dir} has none: "
                              f"name the run's own tasks in config/run/{run_id}.yaml (tasks:)")
    metrics: dict[str, Any] = {"run_id": run_id, "tasks": list(tasks), "control": control,
                               "inputs": {}}
    for name, (kind, data) in inputs.items():
        entry: dict[str, Any] = {"kind": kind}
        if kind == "outcomes":
            entry["runs"] = data.height
        for task in tasks:
            task_kind, fn = TASKS[task]
            if task_kind == kind and (result := fn(data, control)) is not None:
                entry[task] = result
        metrics["inputs"][name] = entry
    return metrics


def render_metrics(metrics: dict[str, Any]) -> str:
    """metrics.json's text: strict JSON, sorted keys, two-space indent, a final newline."""
    return json.dumps(metrics, indent=2, sort_keys=True, allow_nan=False) + "\n"


def _fmt(x: Any) -> str:
    if x is None:
        return "–"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return f"{x:.6g}"
    return str(x)


def report(run: dict[str, Any], metrics: dict[str, Any], inputs: dict[str, str],
           types: dict[str, dict[str, str]]) -> str:
    """The evaluation report (Markdown): what was evaluated, the tasks, the figures.

    Args:
        run: run.json (run id, mode, target, commit, execution id).
        metrics: metrics.json (:func:`evaluate`).
        inputs: eval input file name -> sha256.
        types: the task types' descriptions (:func:`task_types`).
    """
    lines = [f"# Evaluation of {run['run_id']} ({run['mode']})", "",
             f"- step: {run.get('step')}; Snakemake target `{run['target']}`",
             f"- commit {run.get('commit')}, execution {run.get('execution_id')}",
             f"- control cell: {metrics['control']}", "", "## Inputs (eval_inputs/)", "",
             "| file | sha256 |", "|---|---|"]
    lines += [f"| {name} | `{digest[:16]}` |" for name, digest in sorted(inputs.items())]
    lines += ["", "## Tasks", ""]
    lines += [f"- **{t}**: {types.get(t, {}).get('description', '')}" for t in metrics["tasks"]]
    for name, entry in metrics["inputs"].items():
        lines += ["", f"## {name}", ""]
        if "runs" in entry:
            lines.append(f"{entry['runs']} runs.")
        if "cell_means" in entry:
            cols = [y for y in PRIMARY_OUTCOMES
                    if any(y in row for row in entry["cell_means"].values())]
            lines += ["", "### cell_means (primary outcomes)", "",
                      "| cell | runs | " + " | ".join(cols) + " |",
                      "|---|---|" + "---|" * len(cols)]
            lines += [f"| {cell} | {row['n_runs']} | "
                      + " | ".join(_fmt(row.get(y)) for y in cols) + " |"
                      for cell, row in entry["cell_means"].items()]
        if "effects_vs_control" in entry:
            lines += ["", "### effects_vs_control (mean ± SD of paired differences, n)", "",
                      "| cell | outcome | mean | SD | n |", "|---|---|---|---|---|"]
            for cell, row in entry["effects_vs_control"].items():
                lines += [f"| {cell} | {y} | {_fmt(d['mean'])} | {_fmt(d['sd'])} | {d['n']} |"
                          for y, d in row.items() if y != "n_pairs"]
        if "control_sd" in entry:
            lines += ["", "### control_sd", "", "| outcome | n | mean | SD |", "|---|---|---|---|"]
            lines += [f"| {y} | {d['n']} | {_fmt(d['mean'])} | {_fmt(d['sd'])} |"
                      for y, d in entry["control_sd"].items()]
        if "manifest_figures" in entry:
            lines += ["", "### manifest_figures", "", "| key | value |", "|---|---|"]
            lines += [f"| {k} | {_fmt(v)} |" for k, v in entry["manifest_figures"].items()]
    return "\n".join(lines) + "\n"
