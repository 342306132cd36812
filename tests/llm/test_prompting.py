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
