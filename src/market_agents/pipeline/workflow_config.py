"""The Snakemake workflow's own config (``config/workflow.yaml``): which design files play which
role in the protocol, the caps the budget gate enforces and the token profile it plans with.

Its field defaults are the protocol's defaults, defined here once: every ``ma`` command that
takes one of them as an option defaults to :data:`DEFAULTS` (the tokens per decision come from
the LLM layer's ``TokenProfile``, which the mock provider needs below the workflow).

It is a pydantic model like the simulation config, validated once by the ``Snakefile``;
``workflow/schemas/*.schema.json`` are generated from these models by ``ma schema`` and a test
fails when they drift.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from market_agents.atomic import write_text_atomic
from market_agents.config import Config
from market_agents.config_llm import TokenProfile
from market_agents.core import Strict, validation_message
from market_agents.errors import ConfigError
from market_agents.inputs import NEW_CACHE_ENV, REPLAY_ENV
from market_agents.layout import deviations_log

SCHEMA_DIR = Path("workflow/schemas")
_TOKENS = TokenProfile()


class WorkflowConfig(Strict):
    """``config/workflow.yaml``: the design names of each protocol stage, and the protocol's
    defaults every command reads (planning tokens and USD per decision, project, pilot and
    re-pilot caps, reconciliation tolerance, T1 seed floor, control cell), the paper's design
    and the serving switches (replay, new cache, deviation).
    """

    designs_dir: str = Field(default="config/designs", description="where <design>.yaml live")
    exploratory: str = Field(default="exploratory", description="Phase 5a mock design")
    sigma: str = Field(default="sigma", description="free control runs for the outcome SDs")
    pilot: str = Field(default="pilot_openai", description="Phase 5b live pilot design")
    confirmatory: str = Field(default="confirmatory", description="the tiered design")
    repilot: str = Field(default="repilot_openai",
                         description="the failure path's one-seed re-pilot with prompt v2 (§4)")
    tokens_in: int = Field(default=_TOKENS.tokens_in, ge=1,
                           description="planned input tokens per decision")
    tokens_out: int = Field(default=_TOKENS.tokens_out, ge=1,
                            description="planned output tokens per decision")
    project_cap_usd: float = Field(default=40.0, ge=0, description="all live spend, all designs")
    pilot_cap_usd: float = Field(default=5.0, ge=0, description="live spend of the pilot design")
    repilot_cap_usd: float = Field(default=0.7, ge=0,
                                   description="live spend of the re-pilot design (§4)")
    reconcile_tolerance: float = Field(
        default=0.10, ge=0, description="overrun of cumulative spend over plan that triggers cuts"
    )
    t1_min_seeds: int = Field(default=8, ge=1, description="T1 cells are never cut below this")
    control: str = Field(default="share_0",
                         description="control cell of the paired differences (pilot, contract)")
    planning_usd_per_decision: float = Field(
        default=0.0005, gt=0,
        description="planned USD per decision; the pilot's cost criterion is checked against it",
    )
    runs_per_job: int = Field(
        default=12, ge=1, description="free runs (cells x seeds) made by one job, in one "
        "process: fewer jobs start fewer processes; more jobs keep more cores busy"
    )
    max_seeds: int | None = Field(
        default=None, ge=1, description="only the first N seeds of every cell (a small stage)"
    )
    paper: str | None = Field(
        default=None, description="design of `.venv/bin/snakemake paper` (default: the "
        "confirmatory one); "
        "rehearse_<design> for its mock rehearsal")
    bazaar_usd_cap: float = Field(
        default=1.0, ge=0, description="USD cap of one live Bazaar evaluation (ma bazaar eval)"
    )
    replay: bool = Field(
        default=False, description="serve every run from its response cache: a missing answer "
        "stops the job, no key is needed, no provider is called (`--config replay=true`)"
    )
    new_cache: bool = Field(
        default=False, description="this invocation may start a cache over although records "
        "show it held paid answers (`--config new_cache=true`; those answers are bought again)"
    )
    deviation: str | None = Field(
        default=None, description="run confirmatory live jobs although the freeze no longer "
        "matches, for this reason (`--config deviation='...'`; logged in "
        f"{deviations_log()} and in every run manifest)"
    )

    def serving_env(self) -> dict[str, str]:
        """Environment for the `ma` jobs: the serving switches (not rule parameters, so
        toggling them never re-runs a finished job)."""
        flags = {REPLAY_ENV: self.replay, NEW_CACHE_ENV: self.new_cache}
        return {name: "1" for name, on in flags.items() if on}

    def guard_env(self) -> dict[str, str]:
        """Environment for the `ma` jobs: the settings the guards of every paying command
        read (caps, the pilot and confirmatory designs, the deviation). Not rule parameters,
        so a new deviation or cap never re-runs a finished job."""
        keep = ("designs_dir", "pilot", "confirmatory", "project_cap_usd", "pilot_cap_usd",
                "deviation")
        return {GUARD_ENV: json.dumps(self.model_dump(include=set(keep)), sort_keys=True)}

    def design_path(self, name: str) -> Path:
        """``<designs_dir>/<name>.yaml``."""
        return Path(self.designs_dir) / f"{name}.yaml"

    def target(self, design: str, mock: bool = False) -> str | None:
        """The Snakemake target (``rules/targets.smk``) that makes the runs of the design named
        ``design`` (its rehearsal's with ``mock``), or None when the workflow gives it no role
        (make it with ``ma design``). The exploratory and sigma designs are free and have no
        rehearsal."""
        roles = {self.exploratory: "exploratory", self.sigma: "sigma", self.pilot: "pilot",
                 self.confirmatory: "confirmatory", self.repilot: "repilot"}
        role = roles.get(design)
        if role is None or not mock:
            return role
        return None if role in ("exploratory", "sigma") else f"rehearse_{role}"


DEFAULTS = WorkflowConfig()
GUARD_ENV = "MARKET_AGENTS_GUARDS"


def guard_settings() -> WorkflowConfig:
    """The protocol settings a paying `ma` command guards with: :data:`DEFAULTS`, or the
    invoking workflow's config when it runs as a workflow job (:meth:`WorkflowConfig.guard_env`)."""
    raw = os.environ.get(GUARD_ENV)
    if not raw:
        return DEFAULTS
    try:
        return validate_workflow_config(json.loads(raw), f"${GUARD_ENV}")
    except ValueError:
        raise ConfigError(f"${GUARD_ENV}: not valid JSON; it is set by the workflow "
                          "(rules/common.smk), unset it to use the defaults") from None


def validate_workflow_config(
    data: dict[str, Any], where: str = "workflow config"
) -> WorkflowConfig:
    """Validate the Snakemake ``config`` dict; the error names every bad key and says where the
    schema lives."""
    try:
        return WorkflowConfig.model_validate(data or {})
    except ValidationError as exc:
        raise ConfigError(
            f"{where}: {validation_message(exc, data, WorkflowConfig)}. Fix the key in "
            "config/workflow.yaml (or the --config/--configfile you passed); the schema is "
            "workflow/schemas/config.schema.json"
        ) from None


def schemas() -> dict[str, dict[str, Any]]:
    """File name → JSON schema, for every model the workflow validates."""
    return {
        "config.schema.json": WorkflowConfig.model_json_schema(),
        "simulation.schema.json": Config.model_json_schema(),
    }


def render_schema(schema: dict[str, Any]) -> str:
    """A JSON schema as the committed text (sorted keys, 2-space indent, final newline)."""
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def write_schemas(directory: Path = SCHEMA_DIR) -> list[Path]:
    """Write ``workflow/schemas/*.schema.json`` from the config models (``ma schema``) and
    return the paths written.
    """
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, schema in schemas().items():
        path = directory / name
        write_text_atomic(path, render_schema(schema))
        written.append(path)
    return written
