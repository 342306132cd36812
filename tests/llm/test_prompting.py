import json

import pytest

from market_agents.llm import prompting
from tests.support.llm import RULES, snapshot


def test_same_state_same_bytes_and_rounding():
    a = prompting.build_messages(snapshot(mid=470.123456), RULES)
    b = prompting.build_messages(snapshot(mid=470.12344), RULES)
    assert a == b  # both round to 470.12
    snap = prompting.extract_snapshot(a[1].content)
    assert snap["assets"][0]["mid_price"] == 470.12
    assert list(snap) == ["tick", "assets", "your_cash", "your_wealth", "position_limit",
                          "max_leverage", "your_open_orders"]


def test_snapshot_shows_only_public_fields():
    raw = snapshot()
    raw["assets"][0]["fundamental"] = 999.0  # V must never reach a prompt
    text = prompting.build_messages(raw, RULES)[1].content
    assert "999" not in text and "fundamental" not in text
    assert "public_value" in text


def test_system_prompt_depends_only_on_prompt_id():
    a = prompting.build_messages(snapshot(tick=1), RULES, "diverse", "momentum")
    b = prompting.build_messages(snapshot(tick=9), RULES, "diverse", "momentum")
    c = prompting.build_messages(snapshot(tick=1), RULES, "diverse", "value")
    assert a[0] == b[0] and a[0] != c[0] and a[1] != b[1]
    version = prompting.PROMPT_VERSION
    assert prompting.prompt_id("diverse", "value") == f"market-{version}-diverse-value"


def test_memory_and_channel_sections():
    mem = [{"tick": 3, "action": "buy", "qty": 2, "price": None, "filled": 2}]
    chan = [{"peer": 12, "tick": 4, "message": "selling the top"}]
    text = prompting.build_messages(snapshot(), RULES, memory=mem, channel=chan)[1].content
    assert "tick 3: buy 2 @ market, filled 2" in text
    assert "trader 12 (tick 4): selling the top" in text
    plain = prompting.build_messages(snapshot(), RULES)[1].content
    assert "recent decisions" not in plain and "cohort" not in plain
    empty = prompting.build_messages(snapshot(), RULES, memory=[], channel=[])[1].content
    assert empty.count("- none") == 2


def test_unknown_prompt_set_or_persona():
    with pytest.raises(ValueError, match="prompt_set 'fancy'"):
        prompting.personas("fancy")
    with pytest.raises(ValueError, match="persona 'momentum'"):
        prompting.build_messages(snapshot(), RULES, "single", "momentum")
    assert len(prompting.personas("diverse")) == 5


def test_extract_snapshot_roundtrip_and_absent():
    msgs = prompting.build_messages(snapshot(), RULES)
    assert prompting.extract_snapshot(msgs[1].content) == json.loads(
        json.dumps(prompting.canonical_snapshot(snapshot())))
    assert prompting.extract_snapshot("no snapshot here") is None


def test_v2_is_v1_with_the_schemas_limits_stated():
    from market_agents.llm.config import LLMConfig
    from market_agents.llm.schema import MAX_QTY

    snap = snapshot()
    v1 = prompting.build_messages(snap, RULES)[0].content
    v2 = prompting.build_messages(snap, RULES, version="v2")[0].content
    assert v2.startswith(v1.split("\n\n")[0]) and f"from 1 to {MAX_QTY}" in v2
    assert f"from 1 to {MAX_QTY}" not in v1
    assert prompting.prompt_id("single", "default", "v2") == "market-v2-single-default"
    with pytest.raises(ValueError, match="unknown prompt version 'v9'"):
        prompting.build_messages(snap, RULES, version="v9")
    assert LLMConfig(prompt_version="v2").prompt_version == "v2"
    with pytest.raises(ValueError, match="unknown prompt revision 'v9'"):
        LLMConfig(prompt_version="v9")


# --- prompt sets are data (llm/prompt_sets.yaml; a config's or design's own sets) -------------

HERD = {"herd": {"follower": "You follow what most traders around you do.",
                 "leader": "You act first and expect others to follow."}}


def test_the_persona_sets_are_read_from_the_data_file_beside_the_prompt():
    import yaml

    from market_agents import config_llm

    data = yaml.safe_load(prompting.PROMPT_SETS_FILE.read_text())
    assert prompting.PERSONAS == data and list(prompting.PERSONAS) == ["single", "diverse"]
    assert list(prompting.PERSONAS["diverse"]) == ["value", "momentum", "contrarian",
                                                   "cautious", "liquidity"]
    assert config_llm.PROMPT_SETS_FILE == prompting.PROMPT_SETS_FILE
    assert config_llm.package_prompt_sets() == tuple(prompting.PERSONAS)


def test_a_configs_own_set_gives_its_personas_and_their_lines():
    assert prompting.personas("herd", HERD) == ["follower", "leader"]
    system = prompting.build_messages(snapshot(), RULES, "herd", "leader", own=HERD)[0].content
    assert system.endswith("\n\nYou act first and expect others to follow.")
    assert system.startswith(prompting.build_messages(snapshot(), RULES)[0].content.split(
        "\n\n")[0])
    with pytest.raises(ValueError, match=r"unknown prompt_set 'herd'; known: \['diverse', "
                                         r"'single'\]"):
        prompting.personas("herd")


@pytest.mark.parametrize(("llm", "message"), [
    ({"prompt_set": "fancy"}, r"baseline.yaml: population.llm.prompt_set: unknown prompt set "
     r"'fancy'; known: single, diverse \(got 'fancy'\)$"),
    ({"prompt_set": "herdx", "prompt_sets": HERD}, r"unknown prompt set 'herdx'; known: "
     r"single, diverse, herd"),
    ({"prompt_sets": {"single": {"a": "x"}}}, r"population.llm.prompt_sets: "
     r"'single' is a set of llm/prompt_sets.yaml \(single, diverse\): give yours another name"),
    ({"prompt_sets": {"mine": {}}}, r"'mine' has no persona"),
    ({"prompt_sets": {"mine": {"a": ""}}}, r"prompt_sets.mine.a: String should have at least 1"),
    ({"prompt_sets": {"my-set": {"a": "x"}}}, r"prompt_sets.my-set.\[key\]: String should "
     r"match pattern"),
])
def test_a_bad_prompt_set_is_one_line_naming_the_key_and_the_known_sets(llm, message):
    from market_agents.config import load_config
    from market_agents.errors import ConfigError
    from tests.support import ROOT

    sets = [f"population.llm.{k}={json.dumps(v)}" for k, v in llm.items()]
    with pytest.raises(ConfigError, match=message) as err:
        load_config(ROOT / "config/baseline.yaml", sets)
    assert "\n" not in str(err.value)


def test_own_sets_are_left_out_of_the_dump_unless_given():
    from market_agents.config import config_hash, load_config
    from tests.support import ROOT

    base = load_config(ROOT / "config/baseline.yaml")
    assert "prompt_sets" not in base.model_dump(mode="json")["population"]["llm"]
    own = load_config(ROOT / "config/baseline.yaml",
                      [f"population.llm.prompt_sets={json.dumps(HERD)}",
                       "population.llm.prompt_set=herd"])
    assert own.model_dump(mode="json")["population"]["llm"]["prompt_sets"] == HERD
    assert config_hash(own) != config_hash(base)


def test_a_set_added_to_the_package_data_file_alone_is_known_and_runs(tmp_path):
    """What once needed two edits (PERSONAS and a Literal in the config) is one entry in
    llm/prompt_sets.yaml: a copy of the package with that entry validates and runs a mock
    cell with the new set's personas."""
    import shutil
    import subprocess
    import sys

    import polars as pl
    import yaml

    from tests.support import ROOT

    pkg = tmp_path / "src/market_agents"
    shutil.copytree(prompting.PROMPT_SETS_FILE.parents[1], pkg,
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "config", tmp_path / "config")  # the price table beside the package
    data_file = pkg / "llm/prompt_sets.yaml"
    data_file.write_text(data_file.read_text() + yaml.safe_dump(HERD, width=200))
    out = tmp_path / "run"
    code = ("import sys; from market_agents.cli import main; sys.exit(main(sys.argv[1:]))")
    done = subprocess.run(
        [sys.executable, "-c", code, "run", str(ROOT / "config/baseline.yaml"), "--seed", "1",
         "--out", str(out), "--quiet", "--set", "population.llm_share=0.1",
         "--set", "simulation.ticks=80", "--set", "population.llm.prompt_set=herd"],
        capture_output=True, text=True, env={"PYTHONPATH": str(pkg.parent), "PATH": ""},
        cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    ids = set(pl.read_parquet(out / "llm_decisions.parquet")["prompt_id"])
    assert ids and ids <= {"market-v1-herd-follower", "market-v1-herd-leader"}
