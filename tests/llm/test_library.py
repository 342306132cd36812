import dataclasses

import numpy as np
import pytest

from market_agents.errors import ConfigError
from market_agents.llm import prompting, schema
from market_agents.llm.client import LLMClient
from market_agents.llm.config import LLMConfig
from market_agents.llm.library import FEATURES, DecisionLibrary, snapshot_features
from tests.support.llm import RULES, decision_request, snapshot


def _fill(path, n=60, model="gpt-5.4-nano"):
    c = LLMClient.from_settings(LLMConfig(models={"mock": model}), cache_path=path, env={})
    reqs = [decision_request(model=model, agent=f"s{i}", tick=i, mid=465.0 + i % 20,
                             shares=i % 30) for i in range(n)]
    res = c.complete_many(reqs, schema.parse_decision)
    c.close()
    return reqs, res


def test_library_from_cache_keeps_one_model_and_plain_prompts(tmp_path):
    path = tmp_path / "c"
    reqs, res = _fill(path)
    _fill(path, 10, model="gpt-5.4-mini")  # another model: left out
    c = LLMClient.from_settings(LLMConfig(models={"mock": "gpt-5.4-nano"}), cache_path=path,
                                env={})
    memo = decision_request(model="gpt-5.4-nano", agent="m")
    memo = dataclasses.replace(memo, messages=prompting.build_messages(snapshot(), RULES,
                                                                       memory=[]))
    c.complete_many([memo], schema.parse_decision)  # a memory prompt: left out
    c.close()
    lib = DecisionLibrary.from_cache(path, "gpt-5.4-nano")
    assert len(lib) == 60 and lib.x.shape == (60, len(FEATURES))
    invalid = sum(1 for r in res if not r.valid)
    assert sum(1 for e in lib.error if e) == invalid
    assert all(lib.action[i] == 0 for i, e in enumerate(lib.error) if e)  # invalid: hold
    assert lib.meta["prompt_versions"] == [prompting.PROMPT_VERSION]
    assert lib.meta["loo_nn_p90"] > 0


def test_nearest_finds_a_recorded_state_and_replays_its_decision(tmp_path):
    _fill(tmp_path / "c")
    lib = DecisionLibrary.from_cache(tmp_path / "c", "gpt-5.4-nano")
    idx, dist = lib.nearest(lib.x[[3, 7]])
    assert list(idx) == [3, 7] and np.allclose(dist, 0.0)
    for i in range(len(lib)):
        d = lib.decision(i, 500.0)
        if d["order_type"] == "limit":
            assert d["limit_price"] == round(500.0 * (1 + lib.offset[i]), 2)
        if d["action"] == "hold":
            assert d["quantity"] == 0


def test_save_load_roundtrip_and_bad_file(tmp_path):
    _fill(tmp_path / "c")
    lib = DecisionLibrary.from_cache(tmp_path / "c", "gpt-5.4-nano")
    back = DecisionLibrary.load(lib.save(tmp_path / "lib" / "nano.npz"))
    assert np.array_equal(back.x, lib.x) and list(back.error) == list(lib.error)
    assert back.meta["loo_nn_p90"] == lib.meta["loo_nn_p90"] and len(back.meta["sha256"]) == 64
    (tmp_path / "junk.npz").write_bytes(b"not a library")
    with pytest.raises(ConfigError, match="frozen_library: cannot read"):
        DecisionLibrary.load(tmp_path / "junk.npz")
    with pytest.raises(ConfigError, match="library is empty"):
        DecisionLibrary.from_cache(tmp_path / "c", "gpt-9")


def test_features_are_what_every_trader_sees():
    snap = prompting.canonical_snapshot(snapshot(mid=470.0, vpub=475.0, shares=10))
    f = dict(zip(FEATURES, snapshot_features(snap), strict=True))
    assert f["gap"] == pytest.approx(5 / 475)
    assert f["position"] == pytest.approx(4700 / snap["your_wealth"])
    assert f["halted"] == 0.0


def test_library_config_rules():
    with pytest.raises(ValueError, match="needs frozen_library"):
        LLMConfig(provider_mix={"library": 1.0}, models={"library": "gpt-5.4-nano"})
    with pytest.raises(ValueError, match="provider_mix to {library: 1.0}"):
        LLMConfig(frozen_library="x.npz")
    LLMConfig(provider_mix={"library": 1.0}, models={"library": "gpt-5.4-nano"},
              frozen_library="x.npz")


def test_ma_library_builds_the_file(tmp_path, capsys):
    import json

    from market_agents.cli import main

    _fill(tmp_path / "c")
    out = tmp_path / "nano_v1.npz"
    assert main(["library", str(tmp_path / "c"), "--model", "gpt-5.4-nano", "--out",
                 str(out)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["entries"] == 60 and len(DecisionLibrary.load(out)) == 60
    assert main(["library", str(tmp_path / "nope"), "--model", "m", "--out", str(out)]) == 2
    assert "not an LLM response cache" in capsys.readouterr().err
