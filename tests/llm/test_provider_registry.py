"""A provider is one file and one registration (issue 26): a kind declared in
``market_agents.provider_kinds`` is found by every place that needs a provider fact — the
config's kind validation, its structured-output modes and default settings, the price table,
the provider factory, the wire schema, and Bazaar's ``--provider`` and rule wildcard — and
nothing else spells the list of kinds.

The test-only kind ``echo`` below is declared by one ``register`` call in a fixture (its class
is in this file); if any of those places kept a list of its own, it would not find ``echo``.
"""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

import pytest

from market_agents import config_llm, provider_kinds
from market_agents.bazaar.llm_eval import cmd_eval, register_eval
from market_agents.errors import ConfigError
from market_agents.llm import config as llm_config
from market_agents.llm import structured
from market_agents.llm.providers import registry
from market_agents.llm.providers.base import Provider
from market_agents.llm.types import LLMRequest, LLMResponse
from market_agents.pipeline.workflow import Workflow
from market_agents.prices import load_prices
from tests.support import ROOT

PKG = ROOT / "src" / "market_agents"


class EchoProvider(Provider):
    """A test-only provider: the one file of the kind ``echo``."""

    kind = "echo"
    rejected = {"json_schema": frozenset({"maxLength"})}

    def __init__(self, route, settings, key, url):
        super().__init__(route)
        self.settings, self.key, self.url = settings, key, url

    async def complete(self, request: LLMRequest) -> LLMResponse:  # pragma: no cover
        raise AssertionError("never called here")


ECHO = provider_kinds.ProviderKind(
    name="echo", provider=f"{__name__}:EchoProvider", modes=("json_schema", "grammar"),
    price_key="echo", key_env="ECHO_API_KEY", defaults={"timeout_s": 7.0},
    summary="a test-only provider")


@pytest.fixture
def echo():
    """The one registration of ``echo``, undone afterwards."""
    provider_kinds.register(ECHO)
    try:
        yield ECHO
    finally:
        provider_kinds.unregister("echo")


def echo_config(**providers):
    return config_llm.LLMConfig(provider_mix={"echo": 1.0}, models={"echo": "echo-1"},
                                usd_cap=1.0, providers=providers)


def echo_prices(tmp_path: Path) -> Path:
    path = tmp_path / "prices.yaml"
    path.write_text("currency: USD\nper_tokens: 1000000\nmodels:\n  echo-1: {provider: echo, "
                    "input: 1, cached_input: 0.1, output: 2, date: '2026-01-01', "
                    "source: test row}\n")
    return path


def test_a_registered_kind_is_a_config_kind(echo):
    cfg = echo_config()
    assert cfg.kind("echo") == "echo" and cfg.served_routes() == ["echo"]
    assert cfg.paid_routes() == ["echo"]  # not declared free: priced, budgeted
    # an alias route of the kind, and every name the kinds are known by
    alias = config_llm.LLMConfig(provider_mix={"e": 1.0}, models={"e": "echo-1"},
                                 providers={"e": {"kind": "echo"}})
    assert alias.kind("e") == "echo"
    for kinds in (config_llm.KINDS, llm_config.KINDS):
        assert "echo" in kinds and "echo" in list(kinds)
    assert "echo" not in config_llm.FREE_KINDS


def test_a_registered_kind_brings_its_modes_and_defaults(echo):
    assert config_llm.KIND_MODES["echo"] == structured.KIND_MODES["echo"] == ECHO.modes
    assert echo_config(echo={"structured_output": "grammar"}).structured_output("echo") == \
        "grammar"
    with pytest.raises(ValueError, match="'json_object_schema' is not sent by kind 'echo'"):
        echo_config(echo={"structured_output": "json_object_schema"})
    with pytest.raises(ValueError, match="can be declared free"):  # may_be_free is False
        echo_config(echo={"free": True})
    # the kind's default settings, under what the route sets
    assert echo_config().settings("echo").timeout_s == 7.0
    assert echo_config(echo={"timeout_s": 3.0}).settings("echo").timeout_s == 3.0
    assert echo_config(echo={"max_retries": 1}).settings("echo").timeout_s == 7.0


def test_a_registered_kind_is_built_and_priced(echo, tmp_path):
    assert "echo" in registry.FACTORIES
    assert registry.KEY_ENV["echo"] == "ECHO_API_KEY"
    with pytest.raises(ConfigError, match="ECHO_API_KEY is not set"):
        registry.make_provider("echo", "echo", echo_config().settings("echo"), env={})
    p = registry.make_provider("echo", "echo", echo_config().settings("echo"),
                               env={"ECHO_API_KEY": "k"})
    assert isinstance(p, EchoProvider) and p.key == "k" and p.settings.timeout_s == 7.0
    schema = {"type": "string", "minLength": 1, "maxLength": 9}
    assert structured.wire_schema("echo", "json_schema", schema) == {"type": "string",
                                                                     "minLength": 1}
    assert structured.REJECTED[("echo", "json_schema")] == {"maxLength"}
    # the price table takes rows under the kind's price-table key
    assert "echo" in provider_kinds.price_keys()
    assert load_prices(echo_prices(tmp_path)).price("echo-1").provider == "echo"


def test_a_registered_kind_is_a_bazaar_provider(echo):
    parser = argparse.ArgumentParser()
    eval_parser = register_eval(parser.add_subparsers())
    action = next(a for a in eval_parser._actions if a.dest == "provider")
    assert "echo" in action.metavar.split("|") and "a test-only provider" in action.help
    pattern = Workflow.bazaar_providers.fget(None)
    assert re.fullmatch(pattern, "echo") and not re.fullmatch(pattern, "library")


def test_every_place_forgets_an_unregistered_kind(tmp_path):
    assert "echo" not in provider_kinds.names()
    with pytest.raises(ValueError, match="provider 'echo' is unknown"):
        echo_config()
    with pytest.raises(ValueError, match="unknown provider kind 'echo'"):
        config_llm.ProviderSettings(kind="echo")
    assert "echo" not in config_llm.KIND_MODES and "echo" not in registry.FACTORIES
    with pytest.raises(ConfigError, match="unknown kind 'echo'"):
        registry.make_provider("echo", "echo", config_llm.ProviderSettings(), env={})
    with pytest.raises(ConfigError, match="unknown provider 'echo'"):
        load_prices(echo_prices(tmp_path))
    assert not re.fullmatch(Workflow.bazaar_providers.fget(None), "echo")
    args = argparse.Namespace(tier="micro", provider="echo", model="m", seeds=1, timeout=60.0,
                              max_output_tokens=1024)
    with pytest.raises(ConfigError, match="provider 'echo' is unknown"):
        cmd_eval(args)


def test_the_real_registrations_agree_with_their_classes():
    for kind in provider_kinds.declared():
        assert set(kind.modes) <= set(provider_kinds.MODES), kind.name
        assert set(kind.defaults) <= set(config_llm.ProviderSettings.model_fields), kind.name
        if kind.provider is None:  # the frozen library: no class, never served
            assert kind.free and kind.name not in provider_kinds.served()
            continue
        cls = registry.provider_class(kind.name)
        assert cls.kind == kind.name and issubclass(cls, Provider)
        assert set(cls.rejected) <= set(kind.modes), kind.name  # rejects only what it sends
        assert cls.live is not kind.free, kind.name
    # every row of the project's price table names a declared key
    assert {r.provider for r in load_prices().models.values()} <= set(provider_kinds.price_keys())
    assert structured.REJECTED[("anthropic", "json_schema")] >= {"minimum", "maxLength"}


def _kind_lists(path: Path) -> list[str]:
    """Literals in ``path`` that spell two or more kind names together (a list of kinds)."""
    kinds = set(provider_kinds.names())
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        items = node.keys if isinstance(node, ast.Dict) else \
            node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else []
        names = {n.value for n in items if isinstance(n, ast.Constant) and n.value in kinds}
        if len(names) >= 2:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {sorted(names)}")
    return found


def test_no_other_module_or_rule_spells_the_kinds():
    own = PKG / "provider_kinds.py"
    bad = [hit for path in sorted(PKG.rglob("*.py")) if path != own
           for hit in _kind_lists(path)]
    joined = re.compile(r"\b(" + "|".join(provider_kinds.names()) + r")\|(" +
                        "|".join(provider_kinds.names()) + r")\b")
    bad += [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in sorted((ROOT / "rules").glob("*.smk"))
            for m in joined.finditer(p.read_text())]
    assert bad == []
