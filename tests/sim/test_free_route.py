"""A route declared free (issue 27): a local server's model runs at an explicit 0 USD without a
copy of the price table, and the manifest's price_assumptions say so; undeclared, the same model
id is still refused for having no price."""

from __future__ import annotations

import contextlib
import json

import pytest

from market_agents.config import Config
from market_agents.errors import ConfigError
from market_agents.llm.config import LLMConfig
from market_agents.llm.pricing import load_prices
from market_agents.sim.runner import run_to_dir
from market_agents.testing.fakeserver import FakeAPI

LOCAL = "smollm2-135m-instruct-q4_1"  # no row in config/prices.yaml


def _config(free: bool) -> Config:
    local = {"kind": "openai_compatible", "structured_output": "grammar"}
    if free:
        local["free"] = True
    return Config.model_validate({
        "simulation": {"ticks": 60},
        "population": {"llm_share": 0.1, "llm": {
            "provider_mix": {"local": 1.0}, "models": {"local": LOCAL}, "usd_cap": 1.0,
            "providers": {"local": local}}},
    })


def test_a_free_route_runs_at_zero_and_the_manifest_says_why(tmp_path, monkeypatch):
    assert LOCAL not in load_prices().models
    with FakeAPI(server="llama_cpp_python") as api:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{api.url}/v1")
        run = run_to_dir(_config(True), 3, tmp_path / "run", cache=tmp_path / "cache",
                         paying=contextlib.nullcontext({}))
        assert api.requests
    m = json.loads((run / "manifest.json").read_text())
    row = m["price_assumptions"][LOCAL]
    assert (row["input"], row["cached_input"], row["output"]) == (0.0, 0.0, 0.0)
    assert row["source"].startswith("declared free: population.llm.providers.local.free")
    assert m["llm_usage"]["calls"] > 0 and m["llm_usage"]["usd"] == 0.0
    assert "free: true" in (run / "config.yaml").read_text()


def test_an_undeclared_local_model_is_still_refused_for_its_missing_price(tmp_path):
    with pytest.raises(ConfigError, match=f"model '{LOCAL}' has no price"):
        run_to_dir(_config(False), 3, tmp_path / "run", paying=contextlib.nullcontext({}))


def test_only_a_local_route_can_be_declared_free_and_one_id_has_one_price():
    with pytest.raises(ValueError, match="providers.openai.free: only an openai_compatible"):
        LLMConfig(provider_mix={"openai": 1.0}, models={"openai": "gpt-5.4-nano"},
                  providers={"openai": {"free": True}})
    with pytest.raises(ValueError, match="models.openai: 'gpt-5.4-nano' is also a model of "
                                         "the free route 'local'"):
        LLMConfig(provider_mix={"openai": 0.5, "local": 0.5},
                  models={"openai": "gpt-5.4-nano", "local": "gpt-5.4-nano"},
                  providers={"local": {"kind": "openai_compatible", "free": True}})


def test_the_key_leaves_the_config_hash_of_older_configs_alone():
    assert "free" not in json.dumps(_config(False).model_dump(mode="json"))
    assert _config(True).model_dump(mode="json")["population"]["llm"]["providers"]["local"][
        "free"] is True


def test_a_free_route_is_not_paid_so_designs_plan_it_without_a_price(tmp_path):
    """A design cell on a declared-free local route is not live: no planning price, no
    freeze, no guard; a rehearsal still serves it by the mock."""
    import yaml

    from market_agents.protocol.design import load_design
    from tests.support import ROOT

    free = _config(True).population.llm
    assert free.served_routes() == ["local"] and free.paid_routes() == []
    assert _config(False).population.llm.paid_routes() == ["local"]
    path = tmp_path / "local.yaml"
    path.write_text(yaml.safe_dump({
        "base": str(ROOT / "config/baseline.yaml"), "prices": str(ROOT / "config/prices.yaml"),
        "overrides": {"population.llm.provider_mix": {"local": 1.0},
                      "population.llm.models": {"local": LOCAL},
                      "population.llm.providers": {"local": {"kind": "openai_compatible",
                                                             "free": True}}},
        "cells": [{"name": "local_25", "seeds": [1], "overrides": {"population.llm_share": 0.25}}],
    }))
    design = load_design(path)  # before: "live model ... has no price"
    assert not design.is_live("local_25")
    mock = design.cell_config("local_25", mock=True).population.llm
    assert mock.kind("local") == "mock"
