"""workflow/schemas/*.schema.json are generated from the pydantic models: fail on drift."""

import pytest

from market_agents.errors import ConfigError
from market_agents.pipeline.workflow_config import (
    SCHEMA_DIR,
    WorkflowConfig,
    render_schema,
    schemas,
    validate_workflow_config,
)
from tests.support.workflow import ROOT


@pytest.mark.parametrize("name", sorted(schemas()))
def test_schema_file_matches_models(name):
    path = ROOT / SCHEMA_DIR / name
    assert path.exists(), f"{path} missing: run `ma schema`"
    assert path.read_text() == render_schema(schemas()[name]), (
        f"{path} drifted from the pydantic models: run `ma schema` and commit the result")


def test_workflow_config_file_validates():
    import yaml

    for name in ("config/workflow.yaml", "config/test/workflow.yaml"):
        cfg = validate_workflow_config(yaml.safe_load((ROOT / name).read_text()))
        assert isinstance(cfg, WorkflowConfig)


def test_bad_workflow_config_names_key_and_schema():
    with pytest.raises(ConfigError, match=r"project_cap_usd: Input should be greater than or "
                       r"equal to 0 \(got -1\).*config\.schema\.json"):
        validate_workflow_config({"project_cap_usd": -1})
