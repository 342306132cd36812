"""Issue 37: an unknown key or value is refused in one line that names the closest known one
("did you mean 'tick_size'?"), so the fix is one step away."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import ROOT


def test_unknown_key_names_the_closest_known_one(tmp_path):
    from market_agents.config import load_config
    from market_agents.errors import ConfigError

    with pytest.raises(ConfigError, match=r"exchange\.tick_sise: .*did you mean 'tick_size'\?"):
        load_config(ROOT / "config" / "baseline.yaml", ["exchange.tick_sise=0.02"])
    with pytest.raises(ConfigError, match=r"timout_s: .*did you mean 'timeout_s'\?"):
        load_config(ROOT / "config" / "baseline.yaml",
                    ["population.llm.providers.openai.timout_s=3"])


def _leaf_paths(model, prefix=()):
    from pydantic import BaseModel

    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            yield from _leaf_paths(ann, (*prefix, name))
        else:
            yield (*prefix, name), model


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_property_a_one_letter_typo_of_any_config_key_is_named(data):
    """Every key of the simulation config, with one letter dropped: refused, and the line
    names a known key of the same section (the right one when it is the closest)."""
    from market_agents.config import Config, load_config
    from market_agents.errors import ConfigError

    paths = [(p, m) for p, m in _leaf_paths(Config) if len(p[-1]) >= 5]
    path, model = data.draw(st.sampled_from(paths), label="key")
    i = data.draw(st.integers(0, len(path[-1]) - 1), label="dropped letter")
    typo = path[-1][:i] + path[-1][i + 1:]
    if typo in model.model_fields:
        return
    with pytest.raises(ConfigError) as err:
        load_config(ROOT / "config" / "baseline.yaml", [".".join((*path[:-1], typo)) + "=1"])
    named = re.search(r"did you mean '([^']+)'\?", str(err.value))
    assert named and named.group(1) in model.model_fields, str(err.value)
