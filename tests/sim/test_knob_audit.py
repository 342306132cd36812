"""The knob audit: every config key changes a run when its mechanism is switched on, or is listed
with the reason it cannot. A key added to the config fails here until it is classified.

Each perturbation runs a short market (SHORT) twice, once in its context (the mechanism switched
on) and once with the key changed, and asserts that some table (ticks, trades, orders, agents,
llm_decisions) differs: a knob read from the config and never applied fails.
"""

from __future__ import annotations

import typing
from typing import Any

import pytest
from pydantic import BaseModel

from market_agents.config import Config, apply_overrides, read_yaml, validate
from market_agents.plugins import MECHANISMS, TRADERS
from market_agents.sim.simulation import simulate
from tests.support import ROOT

BASELINE = ROOT / "config" / "baseline.yaml"
TABLES = ("ticks", "trades", "orders", "agents", "llm_decisions")

# A short market on the confirmatory fundamentals: long enough for every mechanism to act.
SHORT = {"simulation.ticks": 160, "simulation.burn_in": 20, "fundamentals.jump_prob": 1.0}
LLM = {"population.llm_share": 0.1, "population.llm.models": {"mock": "gpt-5.4-nano"}}
CONTEXTS: dict[str, dict[str, Any]] = {
    "classical": {},
    "breaker": {"exchange.halt_threshold": 0.01},
    "leverage": {"population.mix.leveraged": 0.25, "population.mix.trend": 0.0},
    "auction": {"exchange.mechanism": "call_auction"},
    "ftt": {"exchange.transaction_tax": 0.001},
    "two_assets": {"fundamentals.n_assets": 2, "fundamentals.factor_loading": [0.7, 0.7]},
    "shock": {"shocks": [{"time": 60, "kind": "fundamental_jump", "size": 10.0}]},
    "llm": LLM,
    "library": {"population.llm_share": 0.1, "population.llm.provider_mix": {"library": 1.0},
                "population.llm.models": {"library": "gpt-5.4-nano"},
                "population.llm.frozen_library": "LIB_A"},
}

# key -> (context, overrides that change it; other keys may move too, e.g. to keep a sum at 1)
PERTURBATIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "simulation.ticks": ("classical", {"simulation.ticks": 150}),
    "simulation.burn_in": ("classical", {"simulation.burn_in": 30}),
    "simulation.decision_interval": ("classical", {"simulation.decision_interval": 10}),
    "simulation.history": ("classical", {"simulation.history": 5}),
    "fundamentals.n_assets": ("classical", {"fundamentals.n_assets": 2}),
    "fundamentals.v0": ("classical", {"fundamentals.v0": 400.0}),
    "fundamentals.sigma": ("classical", {"fundamentals.sigma": 0.7}),
    "fundamentals.jump_prob": ("classical", {"fundamentals.jump_prob": 0.5}),
    "fundamentals.jump_sigma": ("classical", {"fundamentals.jump_sigma": 2.0}),
    "fundamentals.jump_df": ("classical", {"fundamentals.jump_df": None}),
    "fundamentals.news_interval": ("classical", {"fundamentals.news_interval": 5}),
    "fundamentals.factor_loading": ("two_assets", {"fundamentals.factor_loading": [0.2, 0.9]}),
    "exchange.mechanism": ("classical", {"exchange.mechanism": "call_auction"}),
    "exchange.auction_interval": ("auction", {"exchange.auction_interval": 3}),
    "exchange.tick_size": ("classical", {"exchange.tick_size": 0.05}),
    "exchange.order_ttl": ("classical", {"exchange.order_ttl": 5}),
    "exchange.halt_threshold": ("breaker", {"exchange.halt_threshold": 0.02}),
    "exchange.halt_window": ("breaker", {"exchange.halt_window": 4}),
    "exchange.halt_ticks": ("breaker", {"exchange.halt_ticks": 5}),
    "exchange.position_limit": ("classical", {"exchange.position_limit": 291}),
    "exchange.max_leverage": ("leverage", {"exchange.max_leverage": 2.0}),
    "exchange.maintenance_margin": ("leverage", {"exchange.maintenance_margin": 0.1}),
    "exchange.transaction_tax": ("ftt", {"exchange.transaction_tax": 0.003}),
    "population.n_traders": ("classical", {"population.n_traders": 90}),
    "population.n_market_makers": ("classical", {"population.n_market_makers": 4}),
    "population.llm_share": ("classical", {"population.llm_share": 0.05}),
    "population.initial_cash": ("classical", {"population.initial_cash": 15_000.0}),
    "population.initial_shares": ("classical", {"population.initial_shares": 10}),
    "population.mm_initial_cash": ("classical", {"population.mm_initial_cash": 5_000.0}),
    "population.mm_initial_shares": ("classical", {"population.mm_initial_shares": 200}),
    "population.leveraged_cash": ("leverage", {"population.leveraged_cash": 5_000.0}),
    "population.slot_types": ("classical", {"population.slot_types": {10: "leveraged"}}),
    "population.mix.fundamentalist": ("classical", {"population.mix.fundamentalist": 0.30,
                                                    "population.mix.noise": 0.45}),
    "population.mix.trend": ("classical", {"population.mix.trend": 0.20,
                                           "population.mix.noise": 0.45}),
    "population.mix.noise": ("classical", {"population.mix.noise": 0.35,
                                           "population.mix.trend": 0.30}),
    "population.mix.leveraged": ("classical", {"population.mix.leveraged": 0.05,
                                               "population.mix.trend": 0.20}),
    "population.mix.statarb": ("two_assets", {"population.mix.statarb": 0.05,
                                              "population.mix.noise": 0.35}),
    "population.llm.provider_mix": ("llm", {
        "population.llm.provider_mix": {"mock": 0.5, "mock_b": 0.5},
        "population.llm.models": {"mock": "gpt-5.4-nano", "mock_b": "gpt-5.4-nano"},
        "population.llm.providers": {"mock_b": {"kind": "mock"}}}),
    "population.llm.models": ("llm", {"population.llm.models": {"mock": "gpt-5.4-mini"}}),
    "population.llm.prompt_set": ("llm", {"population.llm.prompt_set": "diverse"}),
    "population.llm.prompt_sets": ("llm", {  # a config's own set, named by prompt_set
        "population.llm.prompt_sets": {"herd": {"a": "You follow the crowd.",
                                                "b": "You lead the crowd."}},
        "population.llm.prompt_set": "herd"}),
    "population.llm.prompt_version": ("llm", {"population.llm.prompt_version": "v2"}),
    "population.llm.memory": ("llm", {"population.llm.memory": 3}),
    "population.llm.channel": ("llm", {"population.llm.channel": True}),
    "population.llm.usd_cap": ("llm", {"population.llm.usd_cap": 0.005}),
    "population.llm.decision_cap": ("llm", {"population.llm.decision_cap": 2}),
    "population.llm.frozen_library": ("library", {"population.llm.frozen_library": "LIB_B"}),
    "population.llm.max_output_tokens": ("llm", {"population.llm.max_output_tokens": 512}),
    "population.llm.reasoning_effort": ("llm", {"population.llm.reasoning_effort": "high"}),
    "population.llm.temperature": ("llm", {"population.llm.temperature": 0.5}),
    "population.llm.providers.*.usd_cap": ("llm", {
        "population.llm.providers": {"mock": {"usd_cap": 0.005}}}),
    "population.llm.providers.*.invalid_rate": ("llm", {
        "population.llm.providers": {"mock": {"invalid_rate": 0.5}}}),
    # part of the request key: another mode is another recorded answer (the mock's too);
    # what each mode sends is tested on the wire (tests/llm/test_structured.py)
    "population.llm.providers.*.structured_output": ("llm", {
        "population.llm.providers": {"mock": {"structured_output": "none"}}}),
    "shocks.*.time": ("shock", {"shocks": [{"time": 90, "kind": "fundamental_jump",
                                            "size": 10.0}]}),
    "shocks.*.kind": ("shock", {"shocks": [{"time": 60, "kind": "placebo", "size": 10.0}]}),
    "shocks.*.size": ("shock", {"shocks": [{"time": 60, "kind": "fundamental_jump",
                                            "size": -10.0}]}),
    "shocks.*.asset": ("two_assets", {"shocks": [{"time": 60, "kind": "fundamental_jump",
                                                  "size": 10.0, "asset": 1}]}),
}

# Keys no run's tables can show, and why. Transport keys are tested where they act (the real
# SDKs against the local fake server: tests/llm/test_wire.py, tests/llm/test_client.py).
NO_EFFECT_ON_TABLES: dict[str, str] = {
    "treatment": "labels carried into the manifest and outcomes; no effect on dynamics",
    "population.llm.max_concurrency": "calls in flight at once: the same answers in any order "
                                      "(determinism by design)",
    "population.llm.providers.*.max_concurrency": "calls in flight at once per provider",
    "population.llm.providers.*.kind": "which transport serves a route; offline only the mock "
                                       "answers (wire tests run the real SDKs)",
    "population.llm.providers.*.base_url": "transport: where a live provider is reached",
    "population.llm.providers.*.api_key_env": "transport: which variable holds the key",
    "population.llm.providers.*.timeout_s": "transport: acts only on a call that hangs",
    "population.llm.providers.*.free": "pricing only: a local route's answers cost 0 USD "
                                       "(tests/sim/test_free_route.py)",
    "population.llm.providers.*.max_retries": "transport: acts only on a failing call",
    "population.llm.providers.*.backoff_s": "transport: wait between retries of a failing call",
    "population.llm.providers.*.latency_s": "mock only: simulated latency, same answers by "
                                            "design",
    "population.llm.max_failure_rate": "whether a run whose calls failed is stopped and marked "
                                        "failed (then it has no tables): tests/test_record.py",
    "population.llm.replay": "serving switch: the same answers, from the cache only (tests/"
                             "test_record.py replays byte for byte)",
}


def config_keys(model: type[BaseModel] = Config, prefix: str = "") -> set[str]:
    """Every leaf key of the config tree; ``*`` stands for a mapping key or list index."""
    keys = set()
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        ann = field.annotation
        nested = _model_in(ann)
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            keys |= config_keys(ann, f"{path}.")
        elif path == "population.mix":  # a share per registered type that takes one
            keys |= {f"{path}.{t.name}" for t in TRADERS if t.in_mix}
        elif nested is not None:
            keys |= config_keys(nested, f"{path}.*.")
        else:
            keys.add(path)
    return keys


def _model_in(ann: Any) -> type[BaseModel] | None:
    """The model inside ``list[M]`` or ``dict[str, M]`` (None for anything else)."""
    if typing.get_origin(ann) in (list, dict):
        inner = typing.get_args(ann)[-1]
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            return inner
    return None


def switch_keys() -> set[str]:
    """The switches of the package's own mechanisms (``exchange.<key>``: not fields of the
    config models; an installed plug-in's are its own tests')."""
    return {f"exchange.{m.key}" for m in MECHANISMS
            if m.key and m.__module__.startswith("market_agents.")}


def test_every_config_key_is_classified():
    keys = config_keys() | switch_keys()
    assert not keys & set(NO_EFFECT_ON_TABLES) & set(PERTURBATIONS)
    unclassified = keys - set(PERTURBATIONS) - set(NO_EFFECT_ON_TABLES)
    assert not unclassified, f"classify in tests/test_knob_audit.py: {sorted(unclassified)}"
    assert not (set(PERTURBATIONS) | set(NO_EFFECT_ON_TABLES)) - keys, "stale entries"


def test_config_keys_walks_nested_models():
    keys = config_keys()
    assert {"exchange.max_leverage", "population.mix.leveraged", "shocks.*.size",
            "population.llm.providers.*.invalid_rate", "treatment"} <= keys
    assert not keys & {"population.llm", "population.mix", "population.llm.providers", "shocks"}


@pytest.fixture(scope="module")
def libraries(tmp_path_factory) -> dict[str, str]:
    """Two decision libraries from two short mock runs (for the frozen_library knob)."""
    from market_agents.llm.library import DecisionLibrary

    root = tmp_path_factory.mktemp("libraries")
    out = {}
    for name, seed in (("LIB_A", 1), ("LIB_B", 2)):
        cache = root / f"{name}.sqlite"
        simulate(build({**SHORT, **LLM}), seed, cache, progress=False)
        out[name] = str(DecisionLibrary.from_cache(cache, "gpt-5.4-nano").save(
            root / f"{name}.npz"))
    return out


def build(overrides: dict[str, Any], libraries: dict[str, str] | None = None) -> Config:
    libraries = libraries or {}
    resolved = {k: libraries.get(v, v) if isinstance(v, str) else v
                for k, v in overrides.items()}
    return validate(apply_overrides(read_yaml(BASELINE), resolved, "knob audit"), "knob audit")


_BASE_RUNS: dict[str, dict[str, Any]] = {}


def tables(overrides: dict[str, Any], libraries: dict[str, str]) -> dict[str, str]:
    run = simulate(build(overrides, libraries), 7, progress=False)
    return {name: run[name].write_csv() for name in TABLES}


@pytest.mark.parametrize("key", sorted(PERTURBATIONS))
def test_knob_changes_the_run(key, libraries):
    context, change = PERTURBATIONS[key]
    base_overrides = {**SHORT, **CONTEXTS[context]}
    if context not in _BASE_RUNS:
        _BASE_RUNS[context] = tables(base_overrides, libraries)
    changed = tables({**base_overrides, **change}, libraries)
    assert changed != _BASE_RUNS[context], f"{key}: {change} left every table unchanged"
