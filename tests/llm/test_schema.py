import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from market_agents.llm import schema


def _objects(node):
    if isinstance(node, dict):
        if node.get("type") == "object":
            yield node
        for v in node.values():
            yield from _objects(v)
    elif isinstance(node, list):
        for v in node:
            yield from _objects(v)


def test_schema_is_strict_everywhere():
    s = schema.decision_schema()
    objs = list(_objects(s))
    assert objs, "the schema has no object"
    for obj in objs:
        assert obj["additionalProperties"] is False
        assert sorted(obj["required"]) == sorted(obj["properties"])
    assert set(s["properties"]) == {"action", "asset", "quantity", "order_type", "limit_price",
                                    "message", "reason"}
    # the ranges stay on the wire (providers drop what they reject: test_structured.py)
    text = json.dumps(s)
    for banned in ("title", "default"):
        assert f'"{banned}"' not in text
    assert s["properties"]["asset"]["enum"] == [0]
    assert (s["properties"]["quantity"]["minimum"], s["properties"]["quantity"]["maximum"]) == (
        0, schema.MAX_QTY)
    assert s["properties"]["reason"]["maxLength"] == schema.MAX_TEXT
    assert schema.decision_schema(2)["properties"]["asset"]["enum"] == [0, 1]


def test_an_asset_the_run_does_not_list_is_invalid():
    text = json.dumps(GOOD | {"asset": 1})
    assert schema.parse_decision(text, n_assets=2).asset == 1
    with pytest.raises(ValidationError, match="asset 1: this market lists asset 0 only"):
        schema.parse_decision(text, n_assets=1)


GOOD = {"action": "buy", "asset": 0, "quantity": 3, "order_type": "limit",
        "limit_price": 471.5, "message": "", "reason": "below value"}


def test_parse_good_decision():
    d = schema.parse_decision(json.dumps(GOOD))
    assert (d.action, d.quantity, d.limit_price) == ("buy", 3, 471.5)


@pytest.mark.parametrize("change,match", [
    ({"action": "short"}, "action"),
    ({"quantity": -1}, "quantity"),
    ({"quantity": schema.MAX_QTY + 1}, "quantity"),
    ({"quantity": 0}, "needs quantity"),
    ({"limit_price": None}, "needs limit_price"),
    ({"extra": 1}, "extra"),
    ({"message": "x" * (schema.MAX_TEXT + 1)}, "message"),
])
def test_schema_violations_are_invalid(change, match):
    with pytest.raises(ValidationError, match=match):
        schema.parse_decision(json.dumps(GOOD | change))


def test_missing_field_and_malformed_json():
    bad = dict(GOOD)
    bad.pop("reason")
    with pytest.raises(ValidationError, match="reason"):
        schema.parse_decision(json.dumps(bad))
    with pytest.raises(ValueError, match="Expecting|Unterminated|Extra data"):
        schema.parse_decision(json.dumps(GOOD)[:20])
    assert schema.error_class(ValueError("x")) == "invalid_json"


@given(
    action=st.sampled_from(["buy", "sell", "hold"]),
    qty=st.integers(1, schema.MAX_QTY),
    market=st.booleans(),
    price=st.floats(0.01, 1e6, allow_nan=False),
    msg=st.text(max_size=50),
)
def test_any_valid_decision_roundtrips(action, qty, market, price, msg):
    d = schema.Decision(action=action, asset=0, quantity=qty,
                        order_type="market" if market else "limit",
                        limit_price=None if market else price, message=msg, reason="r")
    assert schema.parse_decision(d.model_dump_json()) == d


def _reason(text, n_assets=1):
    try:
        schema.parse_decision(text, n_assets=n_assets)
    except ValueError as exc:  # json and pydantic errors alike; anything else is a crash
        return schema.invalid_reason(text, exc)
    return None


@given(cut=st.integers(1, len(json.dumps(GOOD)) - 1))
def test_any_cut_off_answer_is_truncated_json(cut):
    assert _reason(json.dumps(GOOD)[:cut]) == "truncated JSON"


@given(before=st.text(min_size=1).filter(lambda t: t.strip() and "{" not in t),
       after=st.text().filter(lambda t: "{" not in t))
def test_prose_around_an_answer_is_named(before, after):
    assert _reason(before + json.dumps(GOOD) + after) == "text before the JSON object"
    if after.strip():
        assert _reason(json.dumps(GOOD) + "\n" + after) == "text after the JSON object"


@given(field=st.sampled_from(["quantity", "asset", "limit_price"]),
       value=st.one_of(st.integers(-10**6, 10**6), st.floats(allow_nan=True),
                       st.text(max_size=5), st.none()))
def test_any_number_in_any_field_is_valid_or_a_named_reason(field, value):
    reason = _reason(json.dumps(GOOD | {field: value}))
    assert reason is None or field in reason or reason.startswith("malformed JSON"), reason


@given(st.text(max_size=400))
def test_any_text_is_a_decision_or_a_reason_never_a_crash(text):
    reason = _reason(text)
    assert reason is None or (reason and "\n" not in reason[:120])
