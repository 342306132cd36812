"""The run contract (``make run RUN_ID=… MODE=sanity|pilot|full``; docs/contract.md).

A run config ``config/run/<run_id>.yaml`` names the protocol step it dispatches, its Snakemake
target, the files that are its raw evaluation inputs (designs' gathered outcomes, protocol
manifests) and the files it needs from earlier runs (``inputs_from_runs``). ``src/main.py``
checks the run may start, runs the target and copies the inputs into ``eval_inputs/``;
``src/evaluate.py`` writes ``metrics.json``, the evaluation report and the provenance.

Modes:

- ``sanity``: no declaration; the step's rehearsal target on the tiny test designs, on the mock,
  in a fresh working directory under ``results/sanity/<run_id>/`` -- never a live root -- and a
  last line ``SANITY_VALIDATION: PASS`` or ``SANITY_VALIDATION: FAIL reason=…``.
- ``pilot`` (first seed of every cell) and ``full``: only when declared in the committed
  ``.research/record.json``; results in ``.research/results/<run_id>/``.

A pilot or full run id executed again keeps every execution: the newest is the one reported
(the results directory's top level, named by ``.provenance.json``), and each earlier one is
moved, whole, to ``executions/<its execution_id>/`` inside it (:func:`keep_earlier`); the
second execution says so, and ``ma verify`` checks the reported one and the bytes of all.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from market_agents import layout
from market_agents.atomic import write_text_atomic
from market_agents.config import read_yaml
from market_agents.core import Strict, canonical_json, sha256_file, validation_message
from market_agents.errors import ConfigError
from market_agents.pipeline import evaluation, provenance, record
from market_agents.pipeline.provenance import WORK, execution_id
from market_agents.pipeline.record import git, head, require_declared
from market_agents.pipeline.workflow_config import DEFAULTS, validate_workflow_config
from market_agents.protocol.design import load_design
from market_agents.protocol.tiers import TIERS

Mode = Literal["sanity", "pilot", "full"]
MODES = ("sanity", "pilot", "full")
# The protocol's steps in order: a run reads files only from runs of earlier steps; one step
# per tier of protocol.tiers.TIERS, between the freeze and the paper.
STEPS = ("exploratory", "sigma", "pilot", "repilot", "freeze", *TIERS, "paper")
ManifestName = Literal["pilot", "repilot", "freeze"]

# Where each mode's results go: the one place that chooses the roots.
RESULTS_ROOTS: dict[str, Path] = {"sanity": layout.sanity_dir(),
                                  "pilot": Path(".research/results"),
                                  "full": Path(".research/results")}
# What a sanity run must never touch: the live results, caches, manifests and the record.
LIVE_ROOTS = (*(str(layout.ROOT / d) for d in layout.LIVE_DIRS), ".research")
SANITY_CONFIG = {"configfile": "config/test/workflow.yaml"}
DEFAULT_MODES: dict[str, dict[str, Any]] = {
    "sanity": SANITY_CONFIG, "pilot": {"config": {"max_seeds": 1}}, "full": {}}
SANITY_LINE = "SANITY_VALIDATION:"


class ModeSpec(Strict):
    """A run's settings in one mode (sanity, pilot, full): the Snakemake target, whether it
    writes rehearsal files, and the workflow config file.
    """

    target: str | None = Field(default=None, description="Snakemake target in this mode "
                               "(default: the run's); sanity runs the rehearsal")
    mock: bool = Field(default=False, description="the target writes rehearsal files "
                       f"({layout.ROOT / layout.REHEARSAL}/...): read the inputs there")
    configfile: str | None = None
    config: dict[str, Any] = Field(default_factory=dict)


class StagedInput(Strict):
    """Files an earlier run wrote that this run reads (staged into its working directory)."""

    run: str = Field(description="the earlier run (its run_id) whose files this run reads")
    files: list[str] = Field(min_length=1, description="paths relative to the working "
                             "directory, files or folders")
    optional: bool = Field(default=False, description="present only on some paths of the "
                           "protocol (the re-pilot after a failed pilot)")


class RunSpec(Strict):
    """``config/run/<run_id>.yaml``: the protocol step a run dispatches, its Snakemake target,
    designs, staged inputs, evaluation tasks and per-mode settings (docs/contract.md).
    """

    run_id: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    step: Literal[STEPS] = Field(description="the protocol step this run dispatches")  # type: ignore[valid-type]
    description: str = ""
    target: str = Field(description="Snakemake target, e.g. tier_T1")
    designs: list[str] = Field(default_factory=list,
                               description="the designs this step runs (hashed when declared)")
    outcomes: bool = Field(default=True, description="the designs' gathered outcomes are inputs")
    tier: str | None = Field(default=None, description="inputs: the outcomes of this tier's "
                             "runs and the control's (outcomes_<tier>.parquet)")
    manifests: list[ManifestName] = Field(default_factory=list,
                                          description="protocol manifests that are inputs")
    files: list[str] = Field(default_factory=list, description="other inputs (.parquet or "
                             ".json), relative to the working directory, e.g. paper/paper.json")
    tasks: list[str] | None = Field(default=None, description="task types to score (default: "
                                    "every type in .research/evaluation.json)")
    control: str = Field(default=DEFAULTS.control, description="control cell of the effects")
    cores: int = Field(default=2, ge=1)
    modes: dict[Mode, ModeSpec] = Field(default_factory=dict)
    inputs_from_runs: list[StagedInput] = Field(default_factory=list)

    def mode(self, mode: str) -> ModeSpec:
        """The settings of ``mode``: the run config's, over the contract's defaults."""
        if mode not in MODES:
            raise ConfigError(f"MODE={mode!r}: use sanity, pilot or full")
        own = self.modes.get(mode)  # type: ignore[call-overload]
        merged = {**DEFAULT_MODES[mode], **(own.model_dump(exclude_unset=True) if own else {})}
        return ModeSpec(**merged)

    def target_for(self, mode: str) -> str:
        """The Snakemake target of ``mode``: the mode's own, else the run's."""
        return self.mode(mode).target or self.target


# --- files --------------------------------------------------------------------------------


def run_config_path(run_id: str, root: Path = Path(".")) -> Path:
    """``<root>/config/run/<run_id>.yaml``."""
    return root / "config" / "run" / f"{run_id}.yaml"


def load_run_spec(run_id: str, root: Path = Path(".")) -> RunSpec:
    """Read and validate a run config.

    Args:
        run_id: the run's id (``config/run/<run_id>.yaml``).
        root: the project directory.

    Returns:
        The :class:`RunSpec`.

    Raises:
        ConfigError: no such run config, or an invalid one (the message names the file and
            key).
    """
    path = run_config_path(run_id, root)
    if not path.exists():
        known = sorted(p.stem for p in (root / "config" / "run").glob("*.yaml"))
        raise ConfigError(f"RUN_ID={run_id!r}: no {path} (runs: {', '.join(known) or 'none'})")
    raw = read_yaml(path)
    try:
        spec = RunSpec.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {validation_message(exc, raw, RunSpec)}") from None
    if spec.run_id != run_id:
        raise ConfigError(f"{path}: run_id {spec.run_id!r} differs from the file name")
    return spec


def results_dir(run_id: str, mode: str, root: Path = Path(".")) -> Path:
    """``.research/results/<run_id>`` (pilot, full) or ``results/sanity/<run_id>``."""
    return root / RESULTS_ROOTS[mode] / run_id


def work_dir(run_id: str, mode: str, root: Path = Path(".")) -> Path:
    """Where the target runs: the project (pilot, full) or a fresh folder of the sanity run."""
    return results_dir(run_id, mode, root) / WORK if mode == "sanity" else root


def config_hash(run_id: str, root: Path = Path(".")) -> str:
    """SHA-256 of the run config's content (canonical JSON of its YAML)."""
    return hashlib.sha256(canonical_json(read_yaml(run_config_path(run_id, root))).encode()
                          ).hexdigest()


def design_hash(spec: RunSpec, root: Path = Path(".")) -> str:
    """SHA-256 over the design files the run's step runs (config/workflow.yaml's designs_dir),
    with their base configs and price tables: what a declaration pins besides the run config."""
    wf = validate_workflow_config(read_yaml(root / "config/workflow.yaml"), "config/workflow.yaml")
    files: dict[str, str] = {}
    for name in spec.designs:
        path = root / wf.design_path(name)
        if not path.exists():
            raise ConfigError(f"config/run/{spec.run_id}.yaml: design {name!r}: no {path}")
        for f in load_design(path).sources:  # the design, its base config and price table
            files[str(f.resolve().relative_to(root.resolve()))] = sha256_file(f)
    return hashlib.sha256(canonical_json(files).encode()).hexdigest()


def input_sources(spec: RunSpec, mode: str) -> dict[str, Path]:
    """eval_inputs file name -> its source, relative to the working directory: each design's
    gathered outcomes (of ``tier`` and the control) and each named manifest; the rehearsal's files
    in a mode that rehearses (``mock``)."""
    mock = spec.mode(mode).mock
    out = {}
    if spec.outcomes:
        for d in spec.designs:
            name = f"{d}_{spec.tier}" if spec.tier else d
            out[f"{name}.parquet"] = layout.outcomes_path(d, mock, tier=spec.tier)
    for m in spec.manifests:
        out[f"{m}.json"] = layout.manifest_path(m, mock)
    for f in spec.files:
        out[Path(f).name] = Path(f)
    return out


def snakemake_command(spec: RunSpec, mode: str) -> list[str]:
    """The Snakemake command line of a run in ``mode``: its target, cores and config file."""
    m = spec.mode(mode)
    snakefile = Path(__file__).resolve().parents[3] / "Snakefile"
    cmd = [str(Path(sys.executable).parent / "snakemake"), "-s", str(snakefile),
           spec.target_for(mode), "--cores", str(spec.cores)]
    if m.configfile:
        cmd += ["--configfile", m.configfile]
    if m.config:
        cmd += ["--config", *(f"{k}={json.dumps(v)}" for k, v in m.config.items())]
    return cmd


def recorded_command(cmd: list[str]) -> list[str]:
    """The Snakemake command as run.json records it: the arguments after the executable, with
    the Snakefile named as in the checkout (``Snakefile``), not by its absolute path, so that
    nothing committed under ``.research/results/`` names the machine it ran on.

    Args:
        cmd: :func:`snakemake_command`'s command line.

    Returns:
        The arguments after the executable.
    """
    checkout = Path(__file__).resolve().parents[3]
    out = []
    for arg in cmd[1:]:
        path = Path(arg)
        out.append(str(path.relative_to(checkout))
                   if path.is_absolute() and path.is_relative_to(checkout) else arg)
    return out


# --- before a run ---------------------------------------------------------------------------


def check_staged(spec: RunSpec, workdir: Path, root: Path = Path(".")) -> None:
    """Every file a run reads from earlier runs is in its working directory before it starts,
    so a missing stage-in never makes Snakemake rebuild (and pay for) an earlier step."""
    for staged in spec.inputs_from_runs:
        if staged.optional:
            continue
        missing = [f for f in staged.files if not (workdir / f).exists()]
        if missing:
            raise ConfigError(
                f"run {spec.run_id!r} needs {missing[0]} from run {staged.run!r} and "
                f"{workdir / missing[0]} does not exist: run `make run RUN_ID={staged.run} "
                "MODE=full` first, or stage that run's files in (inputs_from_runs)")


def check_order(spec: RunSpec, root: Path = Path(".")) -> None:
    """Runs named in ``inputs_from_runs`` exist and belong to earlier steps."""
    for staged in spec.inputs_from_runs:
        other = load_run_spec(staged.run, root)
        if STEPS.index(other.step) >= STEPS.index(spec.step):
            raise ConfigError(f"config/run/{spec.run_id}.yaml: inputs_from_runs names "
                              f"{staged.run!r} (step {other.step}), which does not come before "
                              f"step {spec.step}")


def clean_tree(root: Path) -> None:
    """Pilot and full results name the commit that produced them: tracked files must equal
    HEAD (results under .research/results/ aside)."""
    status = git(root, "status", "--porcelain", "--untracked-files=no", "--", ".",
                 ":(exclude).research/results")
    if status:
        raise ConfigError(f"{root}: tracked files differ from HEAD ({status.splitlines()[0]}…): "
                          "commit them first, so the results name the commit that produced "
                          "them")


def live_roots(root: Path) -> dict[str, list[int]]:
    """Every file under the live roots: path -> [size, mtime_ns] (what sanity must not touch)."""
    out = {}
    for name in LIVE_ROOTS:
        base = root / name
        if base.exists():
            for p in sorted(base.rglob("*")):
                if p.is_file():
                    st = p.stat()
                    out[p.relative_to(root).as_posix()] = [st.st_size, st.st_mtime_ns]
    return out


def changed_live_files(before: dict[str, list[int]], root: Path) -> list[str]:
    """The files under the live roots that appeared, vanished or changed since ``before``
    (:func:`live_roots`; a sanity run must change none).
    """
    now = live_roots(root)
    return sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))


# --- the two entry points -----------------------------------------------------------------


def execute(spec: RunSpec, mode: str, root: Path = Path(".")) -> Path:
    """``src.main``: check the run may start, run its target, copy its inputs into
    ``eval_inputs/``, write ``run.json``; returns the results directory.

    Raises: RecordError (not declared), ConfigError (a staged input or a target's file missing,
    the target failed).
    """
    spec.mode(mode)
    check_order(spec, root)
    out = results_dir(spec.run_id, mode, root)
    work = work_dir(spec.run_id, mode, root)
    declaration = None
    if mode == "sanity":
        before = live_roots(root)
        if out.exists():
            shutil.rmtree(out)  # free mock output: a sanity run starts afresh
        shutil.copytree(root / "config", work / "config")
        (out / "live_roots.json").write_text(json.dumps(before, sort_keys=True) + "\n")
    else:
        declaration = require_declared(spec.run_id, mode, config_hash(spec.run_id, root),
                                       design_hash(spec, root), root)
        clean_tree(root)
        check_staged(spec, work, root)
    started = dt.datetime.now(dt.UTC)
    cmd = snakemake_command(spec, mode)
    done = subprocess.run(cmd, cwd=work)
    if done.returncode != 0:
        raise ConfigError(f"snakemake {spec.target_for(mode)} failed (exit {done.returncode}); "
                          "see its output above; after a kill run `make unlock TARGET=…` first")
    if mode != "sanity":
        keep_earlier(out)  # only now: a failed target leaves the reported execution in place
    inputs = out / "eval_inputs"
    if inputs.exists():  # a sanity run's, or an execution cut short before its run.json
        shutil.rmtree(inputs)
    inputs.mkdir(parents=True)
    for name, src in input_sources(spec, mode).items():
        if not (work / src).exists():
            raise ConfigError(f"{work / src} does not exist: target {spec.target_for(mode)!r} "
                              f"does not produce it; fix config/run/{spec.run_id}.yaml")
        shutil.copy2(work / src, inputs / name)
    run = {"run_id": spec.run_id, "step": spec.step, "mode": mode,
           "target": spec.target_for(mode), "command": recorded_command(cmd),
           "commit": head(root),
           "execution_id": execution_id(started), "started": started.isoformat(),
           "declaration": declaration}
    (out / "run.json").write_text(json.dumps(run, indent=2, sort_keys=True) + "\n")
    return out


EXECUTIONS = "executions"  # inside a results directory: the executions not reported


def keep_earlier(out: Path) -> Path | None:
    """Move the execution at the top level of the results directory ``out`` (run.json,
    eval_inputs/, metrics.json, evaluation.md: whatever it wrote) into
    ``out/executions/<its execution_id>/``, so that a new execution of the run id never
    replaces it. An execution cut short before its run.json is kept as
    ``incomplete-<time>``; an id kept already gets a suffix (``.2``, ``.3``).

    Returns:
        Where it was kept, or None when the top level held no execution.
    """
    here = [p for p in sorted(out.iterdir()) if p.name not in (EXECUTIONS, WORK)] \
        if out.is_dir() else []
    if not here:
        return None
    try:
        name = str(json.loads((out / "run.json").read_text())["execution_id"])
    except (OSError, ValueError, KeyError, TypeError):
        stamp = max(p.stat().st_mtime for p in here)
        name = "incomplete-" + dt.datetime.fromtimestamp(stamp, dt.UTC).strftime(
            "%Y%m%dT%H%M%SZ")
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
    dest, n = out / EXECUTIONS / name, 1
    while dest.exists():
        n += 1
        dest = out / EXECUTIONS / f"{name}.{n}"
    dest.mkdir(parents=True)
    for p in here:
        os.replace(p, dest / p.name)  # same filesystem: a rename, nothing copied or lost
    return dest


def kept_executions(out: Path) -> list[dict[str, Any]]:
    """The executions kept under ``out/executions/`` (not reported), oldest first:
    ``execution_id``, ``commit_hash``, ``started`` (from each one's run.json; None when it was
    cut short before writing one) and ``path`` (relative to ``out``)."""
    found = []
    for d in sorted((out / EXECUTIONS).glob("*/")):
        try:
            run = json.loads((d / "run.json").read_text())
        except (OSError, ValueError):
            run = {}
        found.append({"execution_id": run.get("execution_id"), "commit_hash": run.get("commit"),
                      "started": run.get("started"), "path": f"{EXECUTIONS}/{d.name}"})
    return sorted(found, key=lambda e: (e["started"] or "", e["path"]))


def executions_note(out: Path) -> str | None:
    """One line saying which execution of the run id in ``out`` is reported and which others
    are kept (None: it was executed once)."""
    others = kept_executions(out)
    if not others:
        return None
    try:
        reported = json.loads((out / "run.json").read_text()).get("execution_id")
    except (OSError, ValueError):
        reported = None
    listed = "; ".join(f"{e['execution_id'] or 'cut short'} (commit "
                       f"{str(e['commit_hash'])[:12]}, started {e['started']}) in {e['path']}/"
                       for e in others)
    return (f"{out.name}: this execution, {reported}, is the one reported ({out}/ and "
            f".provenance.json); {len(others)} other execution(s) of {out.name} are kept: "
            f"{listed}")


def evaluate_run(spec: RunSpec, mode: str, root: Path = Path(".")) -> tuple[Path, str | None]:
    """``src.evaluate``: metrics.json and the evaluation report from ``eval_inputs/``, then the
    provenance of the results directory. Returns the directory and, for sanity, the failure
    reason (None: pass)."""
    out = results_dir(spec.run_id, mode, root)
    run_file = out / "run.json"
    if not run_file.exists():
        raise ConfigError(f"{run_file} does not exist: run `make run RUN_ID={spec.run_id} "
                          f"MODE={mode}` first")
    run = json.loads(run_file.read_text())
    types = evaluation.task_types(root)
    tasks = spec.tasks or list(types)
    unknown = [t for t in tasks if t not in types]
    if unknown:
        raise ConfigError(f"config/run/{spec.run_id}.yaml: tasks {', '.join(unknown)} are not "
                          f"listed in {evaluation.EVALUATION} ({', '.join(types)})")
    metrics = evaluation.evaluate(spec.run_id, tasks, spec.control, out / "eval_inputs")
    write_text_atomic(out / "metrics.json", evaluation.render_metrics(metrics))
    inputs = provenance.file_hashes(out / "eval_inputs")
    write_text_atomic(out / "evaluation.md", evaluation.report(run, metrics, inputs, types))
    provenance.record(out.parent, spec.run_id, run["execution_id"], run["commit"],
                      kept_executions(out))
    return out, sanity_failure(out, metrics, root) if mode == "sanity" else None


def sanity_failure(out: Path, metrics: dict[str, Any], root: Path) -> str | None:
    """Why a sanity run failed, or None: an input without runs, or a file under the live roots
    that changed while it ran."""
    for name, entry in metrics["inputs"].items():
        if entry.get("runs") == 0:
            return f"eval input {name} has no runs"
    changed = changed_live_files(json.loads((out / "live_roots.json").read_text()), root)
    if changed:
        return f"wrote under the live roots: {changed[0]}" + (
            f" and {len(changed) - 1} more" if len(changed) > 1 else "")
    return None


def verify_metrics(directory: Path, root: Path = Path(".")) -> tuple[bool, str]:
    """Re-derive metrics.json from eval_inputs/ with the tasks and control it records."""
    path = directory / "metrics.json"
    try:
        saved = json.loads(path.read_text())
        again = evaluation.evaluate(saved["run_id"], saved["tasks"], saved["control"],
                                    directory / "eval_inputs")
    except (OSError, KeyError, json.JSONDecodeError, ConfigError) as exc:
        return False, f"{path}: cannot re-derive ({exc})"
    same = evaluation.render_metrics(again) == path.read_text()
    return same, (f"{path}: {'equals' if same else 'differs from'} the metrics re-derived from "
                  f"{directory / 'eval_inputs'}")


def verify(run_id: str | None = None, root: Path = Path(".")) -> list[tuple[bool, str]]:
    """``ma verify``: for one results directory (or every one under .research/results/), the
    hash of every file against .provenance.json, metrics.json against the metrics re-derived
    from eval_inputs/, and the run against its declaration in the record. (ok, line) per check.
    """
    results_root = root / RESULTS_ROOTS["full"]
    if run_id is None:
        ids = sorted(p.name for p in results_root.glob("*") if p.is_dir()
                     and not p.name.startswith("."))
        if not ids:
            return [(False, f"{results_root}: no results to verify")]
    else:
        ids = [run_id]
    try:
        runs = record.load(root)
        checks = [(True, f"{root / record.RECORD}: {len(runs)} declarations, append-only chain "
                         "intact")]
    except record.RecordError as exc:
        runs, checks = [], [(False, str(exc))]
    for rid in ids:
        directory = results_root / rid
        checks += provenance.check(results_root, rid)
        checks.append(verify_metrics(directory, root))
        entry = record.find(runs, rid)
        if entry is None:
            checks.append((False, f"{rid}: not declared in {root / record.RECORD}"))
            continue
        try:
            run = json.loads((directory / "run.json").read_text())
        except (OSError, json.JSONDecodeError) as exc:
            checks.append((False, f"{directory / 'run.json'}: unreadable ({exc})"))
            continue
        same = (run.get("declaration") or {}).get("entry_sha256") == entry["entry_sha256"] \
            and run.get("mode") == entry["stage"]
        checks.append((same, f"{rid}: ran as declared ({entry['stage']}, entry "
                             f"{entry['entry_sha256'][:12]})" if same else
                       f"{rid}: run.json does not match its declaration in {record.RECORD}"))
        prov = provenance.load(results_root).get(rid) or {}
        checks.append(reported_check(directory, run, prov))
        commit = prov.get("commit_hash")
        after = bool(commit) and commit == run.get("commit") and record.git(
            root, "merge-base", "--is-ancestor", entry["commit"], commit) is not None
        checks.append((after, f"{rid}: executed at {str(commit)[:12]}, "
                              f"{'a descendant of' if after else 'NOT a descendant of'} the "
                              f"declared commit {entry['commit'][:12]}"))
    return checks


def reported_check(directory: Path, run: dict[str, Any], prov: dict[str, Any]
                   ) -> tuple[bool, str]:
    """(ok, line): the execution the provenance reports is the one at the top level of
    ``directory`` (its run.json), and the other executions it lists are the ones kept there."""
    rid = directory.name
    kept = kept_executions(directory)
    listed = prov.get("other_executions") or []
    same = prov.get("execution_id") == run.get("execution_id") and \
        [e["path"] for e in listed] == [e["path"] for e in kept]
    others = (f"; {len(kept)} other execution(s) kept under {EXECUTIONS}/: "
              f"{', '.join(str(e['execution_id']) for e in kept)}" if kept else "")
    if same:
        return True, f"{rid}: reports execution {run.get('execution_id')}{others}"
    return False, (f"{rid}: .provenance.json reports execution {prov.get('execution_id')} and "
                   f"{len(listed)} other(s), the directory holds {run.get('execution_id')} and "
                   f"{len(kept)} other(s): run `make evaluate RUN_ID={rid}` to declare them")
