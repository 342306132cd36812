"""A request's cache key is computed once and from a shallow copy, and the trader builds the
answer schema once per (assets, band) (issue 38): the keys stay what `dataclasses.asdict`
made of the whole request, so every cache written before still answers."""

from __future__ import annotations

import dataclasses
import hashlib
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from market_agents.agents.llm_trader import _schema_json
from market_agents.core import canonical_json
from market_agents.llm import schema, structured
from market_agents.llm.types import LLMRequest, Message


def _deep_key(req: LLMRequest) -> str:
    """The key as it was defined before: a deep copy of every field (asdict)."""
    data = dataclasses.asdict(req)
    for transport in ("timeout_s", "route", "identity"):
        data.pop(transport)
    if data["structured_output"] is None:
        data.pop("structured_output")
    data["messages"] = [[m.role, m.content] for m in req.messages]
    return hashlib.sha256(canonical_json(data).encode()).hexdigest()


texts = st.text(max_size=40)
requests = st.builds(
    LLMRequest,
    provider=st.sampled_from(["mock", "openai", "anthropic"]),
    model=texts,
    messages=st.lists(st.builds(Message, st.sampled_from(["system", "user"]), texts),
                      max_size=3).map(tuple),
    json_schema=st.one_of(st.none(), st.builds(
        schema.decision_schema, st.integers(1, 2),
        st.one_of(st.none(), st.tuples(st.floats(0.01, 50), st.floats(51, 500))))),
    structured_output=st.sampled_from([None, *structured.MODES]),
    agent=texts,
    extra=st.dictionaries(texts, st.integers(), max_size=2),
    route=texts,
    timeout_s=st.one_of(st.none(), st.floats(0.1, 60)),
    identity=st.dictionaries(texts, texts, max_size=2),
)


@settings(max_examples=60, deadline=None)
@given(requests)
def test_the_key_is_the_deep_copy_key_computed_once_and_invisible(req):
    assert req.key() == _deep_key(req)
    assert req.key() == req.key()  # the memo answers the second call
    twin = dataclasses.replace(req)  # a fresh request: same fields, no memo yet
    assert twin == req and repr(twin) == repr(req) and twin.key() == req.key()
    # transport settings never change the key
    assert dataclasses.replace(req, timeout_s=99.0, route="other").key() == req.key()


def test_the_schema_memo_gives_each_request_its_own_equal_schema():
    band = (50.0, 200.0)
    a, b = (json.loads(_schema_json(2, band)) for _ in range(2))
    # equal as the key sees them (canonical JSON tells 1 from 1.0, == does not)
    assert canonical_json(a) == canonical_json(b) == canonical_json(schema.decision_schema(2, band))
    assert a is not b
    a["properties"]["asset"]["enum"].append(9)  # one request's change reaches no other
    assert json.loads(_schema_json(2, band)) == schema.decision_schema(2, band)
