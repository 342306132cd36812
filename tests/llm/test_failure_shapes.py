"""A real tiny model's failure shapes (SmolLM2-135M-Instruct on llama-cpp-python, recorded by
bench/record_failure_shapes.py): each answer is an invalid decision with its reason, in the
parser and in a whole run, never a crash."""

import json
from pathlib import Path

import polars as pl
import pytest

from market_agents.config import Config
from market_agents.llm import schema
from market_agents.sim.runner import run_to_dir
from market_agents.testing.fakeserver import FakeAPI

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "smollm2_failures.json").read_text())
ANSWERS = FIXTURE["answers"]
SHAPES = {"over-long text", "out-of-range number", "prose around JSON", "truncated JSON",
          "a bare word in prose"}


def test_the_fixture_holds_every_shape_the_issue_names():
    assert {a["shape"] for a in ANSWERS} == SHAPES


@pytest.mark.parametrize("answer", ANSWERS, ids=lambda a: a["shape"])
def test_a_recorded_failure_is_invalid_with_its_reason(answer):
    with pytest.raises(ValueError) as exc:
        schema.parse_decision(answer["text"], n_assets=1)
    assert schema.invalid_reason(answer["text"], exc.value) == answer["reason"]


def test_a_run_answered_only_with_recorded_failures_holds_throughout(tmp_path, monkeypatch):
    config = Config.model_validate({
        "simulation": {"ticks": 150},
        "population": {"llm_share": 0.05, "llm": {
            "provider_mix": {"local": 1.0}, "models": {"local": "gpt-5.4-nano"},
            "usd_cap": 1.0, "providers": {"local": {
                "kind": "openai_compatible", "structured_output": "json_object_schema"}}}},
    })
    texts = [a["text"] for a in ANSWERS]
    with FakeAPI(server="llama_cpp_python",
                 answer=lambda body, digest: texts[digest[0] % len(texts)]) as api:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{api.url}/v1")
        run = run_to_dir(config, 2, tmp_path / "run", cache=tmp_path / "cache", progress=False)
    dec = pl.read_parquet(run / "llm_decisions.parquet")
    manifest = json.loads((run / "manifest.json").read_text())
    assert dec.height > 0 and not dec["valid"].any() and (dec["action"] == "hold").all()
    assert set(dec["error_detail"]) <= {a["reason"] for a in ANSWERS}
    assert manifest["llm_usage"]["valid"] == 0 == manifest["cache_valid"]
    assert manifest["final_conservation_ok"]
    llm_orders = pl.read_parquet(run / "orders.parquet").filter(pl.col("is_llm"))
    assert llm_orders.height == 0
