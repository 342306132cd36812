"""Trader types are plug-ins (issue 34): a type registered from outside the package, through an
entry point of group ``market_agents.traders`` as an installed package does, takes its share of
``population.mix``, trades in a run and is named in agents.parquet; installing it changes no
config's hash; an unknown name is refused in one line that lists the known ones."""

from __future__ import annotations

import itertools
from importlib.metadata import EntryPoint

import polars as pl
import pytest

from market_agents import plugins
from market_agents.config import config_hash, load_config
from market_agents.errors import ConfigError
from market_agents.plugins import TRADERS
from market_agents.sim import fingerprint
from market_agents.sim.runner import run_to_dir

# A trader type as a researcher writes it: one module, one class, registered on import.
DUMMY = '''
from market_agents.agents.base import Trader, ref_price, toward, withdraw
from market_agents.plugins import TRADERS


{decorator}
class Dummy(Trader):
    """Buys one share a decision at the reference price."""

    name = "dummy"

    def decide(self, view):
        a = view.assets[0]
        return withdraw(view) + toward(a, a.shares + 1, ref_price(a), 1, ttl=1)
'''
_modules = itertools.count()
MIX = ["population.mix.dummy=0.1", "population.mix.noise=0.3"]


@pytest.fixture(params=["module", "class"])
def dummy(request, tmp_path, monkeypatch):
    """The ``dummy`` type, installed for this test only: its entry point names a module that
    registers it on import, or the class itself (the registry registers it)."""
    module = f"ma_test_dummy_trader_{next(_modules)}"
    decorator = "@TRADERS.register" if request.param == "module" else ""
    (tmp_path / f"{module}.py").write_text(DUMMY.format(decorator=decorator))
    monkeypatch.syspath_prepend(str(tmp_path))
    value = module if request.param == "module" else f"{module}:Dummy"
    installed = [EntryPoint(name="dummy", value=value, group=TRADERS.group)]
    real = plugins.entry_points
    TRADERS.names()  # the built-ins, registered once per process
    # a registry read afresh, restored after the test: the built-ins and the entry point
    monkeypatch.setattr(TRADERS, "_members", dict(TRADERS._members))
    monkeypatch.setattr(TRADERS, "_origin", dict(TRADERS._origin))
    monkeypatch.setattr(TRADERS, "_loaded", False)
    monkeypatch.setattr(TRADERS, "_declared", None)  # the entry points as the registry read them
    monkeypatch.setattr(plugins, "entry_points", lambda group: (
        installed if group == TRADERS.group else real(group=group)))
    yield module
    # a run in the test hashed the dummy's module into the process's cached fingerprint: a
    # later test in this process must see the package's own again
    fingerprint.fingerprint.cache_clear()


def test_a_plugin_type_takes_its_share_and_trades(dummy, baseline_path, tmp_path):
    assert "dummy" in TRADERS and TRADERS.modules()["dummy"] == dummy
    cfg = load_config(baseline_path, MIX)
    assert list(cfg.population.mix) == ["fundamentalist", "trend", "noise", "leveraged",
                                        "statarb", "dummy"]  # the built-ins' draw comes first
    run = run_to_dir(cfg, 1, tmp_path / "run", progress=False)
    agents = pl.read_parquet(run / "agents.parquet")
    mine = agents.filter(pl.col("type") == "dummy")
    assert mine.height == 9  # 10 % of the 95 slots after the market makers, largest remainder
    assert (mine["n_decisions"] > 0).all() and not mine["is_llm"].any()
    trades = pl.read_parquet(run / "trades.parquet")
    assert trades.filter(pl.col("buyer").is_in(mine["slot"].to_list())).height > 0


def test_installing_a_plugin_changes_no_configs_hash(dummy, baseline_path):
    with_plugin = load_config(baseline_path)
    assert "dummy" not in with_plugin.population.mix  # outside the default mix
    # the baseline's hash as every earlier run recorded it
    assert config_hash(with_plugin) == (
        "95c178dc05a7f9652d43fa37ba856ca7941512e0ad56280af3040e7e8f6fedf5")


def test_a_plugin_type_can_be_pinned_to_a_slot(dummy, baseline_path, tmp_path):
    cfg = load_config(baseline_path, ["population.slot_types={7: dummy}"])
    run = run_to_dir(cfg, 1, tmp_path / "run", progress=False)
    agents = pl.read_parquet(run / "agents.parquet")
    assert agents.filter(pl.col("type") == "dummy")["slot"].to_list() == [7]


def test_a_plugin_named_like_a_built_in_type_is_refused(tmp_path, monkeypatch):
    (tmp_path / "ma_test_clash.py").write_text(
        DUMMY.format(decorator="@TRADERS.register").replace('"dummy"', '"noise"'))
    monkeypatch.syspath_prepend(str(tmp_path))
    TRADERS.names()
    monkeypatch.setattr(TRADERS, "_members", dict(TRADERS._members))
    monkeypatch.setattr(TRADERS, "_origin", dict(TRADERS._origin))
    with pytest.raises(ValueError, match=r"trader type 'noise' is registered twice: by "
                       r"market_agents\.agents\.traders\.noise and by ma_test_clash"):
        __import__("ma_test_clash")


@pytest.mark.parametrize("sets,message", [
    (["population.mix.dumy=0.1", "population.mix.noise=0.3"],
     r"population\.mix: unknown trader type 'dumy' \(known: fundamentalist, leveraged, noise, "
     r"statarb, trend; a plug-in registers more through the entry-point group "
     r"market_agents\.traders"),
    (["population.mix.nosie=0.1"], r"population\.mix: unknown trader type 'nosie'; did you "
     r"mean 'noise'\? \(known: fundamentalist, leveraged, noise, statarb, trend;"),
    (["population.slot_types={7: dumy}"], r"population\.slot_types: unknown trader type "
     r"'dumy' \(known: fundamentalist,"),
    (["population.mix.market_maker=0.0"], r"population\.mix: trader type 'market_maker' takes "
     r"no share of population\.mix \(.*the mix's types: fundamentalist, leveraged, noise, "
     r"statarb, trend\)"),
    (["population.slot_types={7: llm}"], r"population\.slot_types: trader type 'llm' takes no "
     r"share of population\.mix, so no slot is pinned to it"),
], ids=["unknown", "near_miss", "slot_types", "market_maker", "llm_pinned"])
def test_an_unknown_or_mixless_name_is_refused_in_one_line(baseline_path, sets, message):
    with pytest.raises(ConfigError, match=r"baseline\.yaml: " + message) as info:
        load_config(baseline_path, sets)
    assert "\n" not in str(info.value)
