"""The Snakemake workflow's own config (``config/workflow.yaml``): which design files play which
role in the protocol, the caps the budget gate enforces and the token profile it plans with.

Its field defaults are the protocol's defaults, defined here once: every ``ma`` command that
takes one of them as an option defaults to :data:`DEFAULTS` (the tokens per decision come from
the LLM layer's ``TokenProfile``, which the LLM client needs below the workflow).

It is a pydantic model like the simulation config, validated once by the ``Snakefile``;
``workflow/schemas/*.schema.json`` are generated from these models by ``ma schema`` and a test
fails when they drift.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from market_agents.core import Strict, validation_message
from market_agents.errors import ConfigError
from market_agents.llm.config import TokenProfile

SCHEMA_DIR = Path("workflow/schemas")
_TOKENS = TokenProfile()


class WorkflowConfig(Strict):
    designs_dir: str = Field(default="config/designs", description="where <design>.yaml live")
    exploratory: str = Field(default="exploratory", description="Phase 5a mock design")
    sigma: str = Field(default="sigma", description="free control runs for the outcome SDs")
    pilot: str = Field(default="pilot_openai", description="Phase 5b live pilot design")
    confirmatory: str = Field(default="confirmatory", description="the tiered design")
    tokens_in: int = Field(default=_TOKENS.tokens_in, ge=1,
                           description="planned input tokens per decision")
    tokens_out: int = Field(default=_TOKENS.tokens_out, ge=1,
                            description="planned output tokens per decision")
    project_cap_usd: float = Field(default=40.0, ge=0, description="all live spend, all designs")
    pilot_cap_usd: float = Field(default=5.0, ge=0, description="live spend of the pilot design")
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
    max_seeds: int | None = Field(
        default=None, ge=1, description="only the first N seeds of every cell (a small stage)"
    )
    paper: str | None = Field(
        default=None, description="design of `snakemake paper` (default: the confirmatory one); "
        "rehearse_<design> for its mock rehearsal")
    bazaar_usd_cap: float = Field(
        default=1.0, ge=0, description="USD cap of one live Bazaar evaluation (ma bazaar eval)"
    )

    def design_path(self, name: str) -> Path:
        return Path(self.designs_dir) / f"{name}.yaml"


DEFAULTS = WorkflowConfig()


def validate_workflow_config(
    data: dict[str, Any], where: str = "workflow config"
) -> WorkflowConfig:
    """Validate the Snakemake ``config`` dict; the error names every bad key and says where the
    schema lives."""
    try:
        return WorkflowConfig.model_validate(data or {})
    except ValidationError as exc:
        raise ConfigError(
            f"{where}: {validation_message(exc, data)}. Fix the key in config/workflow.yaml "
            "(or the --config/--configfile you passed); the schema is "
            "workflow/schemas/config.schema.json"
        ) from None


def schemas() -> dict[str, dict[str, Any]]:
    """File name → JSON schema, for every model the workflow validates."""
    from market_agents.config import Config

    return {
        "config.schema.json": WorkflowConfig.model_json_schema(),
        "simulation.schema.json": Config.model_json_schema(),
    }


def render_schema(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def write_schemas(directory: Path = SCHEMA_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, schema in schemas().items():
        path = directory / name
        path.write_text(render_schema(schema))
        written.append(path)
    return written
