"""The bottom layer: one canonical JSON behind both hashes, one strict base, one error line."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError, model_validator

import market_agents.config as config_mod
import market_agents.llm.cache as cache_mod
import market_agents.llm.types as types_mod
from market_agents.core import Strict, canonical_json, validation_message

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                  max_size=3),
    max_leaves=10,
)


def test_config_hash_and_cache_key_share_one_canonical_json():
    assert config_mod.canonical_json is canonical_json
    assert types_mod.canonical_json is canonical_json
    assert cache_mod.canonical_json is canonical_json


@given(JSONISH)
def test_canonical_json_ignores_key_order(obj):
    if isinstance(obj, dict):
        assert canonical_json(dict(reversed(list(obj.items())))) == canonical_json(obj)
    assert canonical_json(obj).isascii()


class _Cell(Strict):
    name: str
    tier: int


class _Design(Strict):
    cells: list[_Cell]


def test_strict_refuses_unknown_keys_and_the_message_names_the_item():
    data = {"cells": [{"name": "share_0", "tier": 1}, {"name": "share_25", "tier": "x"}],
            "bogus": 1}
    with pytest.raises(ValidationError) as info:
        _Design.model_validate(data)
    line = validation_message(info.value, data)
    assert "cells.[share_25].tier: Input should be a valid integer" in line
    assert "(got 'x')" in line
    assert "bogus: Extra inputs are not permitted (got 1)" in line


def test_message_without_data_uses_indices_and_names_the_top_level():
    with pytest.raises(ValidationError) as info:
        _Design.model_validate({"cells": [{"name": "a"}]})
    assert validation_message(info.value) == "cells.0.tier: Field required"
    with pytest.raises(ValidationError) as info:
        _Cell.model_validate(3)
    assert validation_message(info.value).startswith("(top level): ")


class _Numbers(Strict):
    x: float = 0.0
    shares: dict[str, float] = {}
    label: dict[str, str | float | int | bool] = {}
    count: int = 0
    anything: dict[str, object] = {}


NON_FINITE = st.sampled_from([float("nan"), float("inf"), float("-inf")])


@given(NON_FINITE, st.sampled_from(["x", "shares", "label", "anything"]))
def test_strict_refuses_non_finite_numbers_in_any_field_however_nested(value, field):
    data = {"x": value} if field == "x" else {field: {"k": value}}
    if field == "anything":
        data = {field: {"k": [{"deeper": value}]}}
    with pytest.raises(ValidationError) as info:
        _Numbers.model_validate(data)
    line = validation_message(info.value, data)
    assert line.startswith(field)
    assert "finite number" in line
    assert ";" not in line  # a union's members are not listed one by one


@given(st.one_of(st.integers(min_value=2**63), st.integers(max_value=-(2**63) - 1)),
       st.sampled_from(["count", "label", "anything"]))
def test_strict_refuses_integers_beyond_int64_anywhere(value, field):
    data = {"count": value} if field == "count" else {field: {"k": value}}
    with pytest.raises(ValidationError) as info:
        _Numbers.model_validate(data)
    line = validation_message(info.value, data)
    assert line.startswith(field)
    assert "does not fit in 64 bits" in line
    assert len(line) < 200  # a huge integer is shown shortened


def test_strict_accepts_the_int64_edges_and_finite_floats():
    ok = _Numbers.model_validate({"count": 2**63 - 1, "label": {"a": -(2**63)}, "x": 1e308,
                                  "anything": {"k": [1.5, {"j": 2}]}})
    assert ok.count == 2**63 - 1


def test_a_validators_own_message_stands_alone():
    class _Checked(Strict):
        n: int = 0

        @model_validator(mode="after")
        def _positive(self):
            if self.n < 0:
                raise ValueError("n: must be positive")
            return self

    with pytest.raises(ValidationError) as info:
        _Checked.model_validate({"n": -1})
    assert validation_message(info.value) == "n: must be positive"
