"""The design registry: the protocol logic the workflow asks at DAG time (which runs a target
needs after the gate's cuts, live tiers, live names, libraries, the dry run's plan line)."""

import json

import pytest

from market_agents.errors import ConfigError
from market_agents.layout import budget_manifest
from market_agents.protocol.registry import DesignRegistry
from market_agents.protocol.tiers import NO_TIER, TIERS
from tests.support import ROOT


@pytest.fixture
def registry(workdir, monkeypatch):
    """The tiny test designs, in a scratch directory (gate manifests are read from there)."""
    monkeypatch.chdir(workdir)
    return DesignRegistry("config/test/designs")


@pytest.fixture
def protocol(workdir, monkeypatch):
    """The protocol's own designs (config/designs)."""
    monkeypatch.chdir(workdir)
    return DesignRegistry("config/designs")


def test_unknown_design_names_the_known_ones(registry):
    with pytest.raises(ConfigError, match=r"unknown design 'nosuch': no config/test/designs/"
                                          r"nosuch\.yaml\. Designs: confirmatory, exploratory"):
        registry.get("nosuch")


def test_a_design_whose_name_differs_from_its_file_is_refused(workdir, registry):
    text = (workdir / "config/test/designs/exploratory.yaml").read_text()
    (workdir / "config/test/designs/other.yaml").write_text(text)
    with pytest.raises(ConfigError, match="name 'exploratory' differs from the file name"):
        registry.get("other")


def test_designs_load_once(registry):
    assert registry.get("exploratory") is registry.get("exploratory")


def test_live_tiers_come_in_the_protocols_order(registry, protocol):
    assert protocol.live_tiers("confirmatory") == list(TIERS)
    assert registry.live_tiers("confirmatory") == ["T1", "T2", "T3", "T4", "T5"]  # T6: mock
    assert registry.live_tiers("exploratory") == []
    assert registry.live_tiers("live") == [NO_TIER]


def test_runs_leave_out_what_the_gate_cut_but_a_rehearsal_runs_everything(registry):
    every = registry.runs("confirmatory", "T1")
    assert every and {registry.tier_of("confirmatory", c) for c, _ in every} == {"T1"}
    cell, seed = every[-1]
    path = budget_manifest("confirmatory", "T1")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"cut": [{"tier": "T1", "cell": cell, "seed": seed}]}))
    assert registry.runs("confirmatory", "T1") == every[:-1]
    assert registry.runs("confirmatory", "T1", mock=True) == every
    first = registry.runs("confirmatory", "T1", mock=True, max_seeds=1)
    assert len(first) == len({c for c, _ in every})


def test_live_names_and_a_cell_live_in_one_design_but_free_in_another(workdir, registry):
    designs, cells = registry.live_names(["pilot_openai", "live", "nosuch"])
    assert designs == {"pilot_openai", "live"} and "share_25" in cells
    # `live` runs a cell named share_0 live; the pilot's share_0 is its free control
    live = workdir / "config/test/designs/live.yaml"
    live.write_text(live.read_text() + "  - {name: share_0}\n")
    with pytest.raises(ConfigError, match="pilot_openai.yaml: cell 'share_0' is free here but "
                                          "live in another live design"):
        DesignRegistry("config/test/designs").live_names(["pilot_openai", "live"])


def test_library_of_a_replaying_cell_and_its_model(protocol):
    registry = protocol
    files = registry.library_files("confirmatory")
    assert files == ["results/library/nano_v1.npz"]
    cell = next(c for c in registry.get("confirmatory").cells
                if registry.frozen_library("confirmatory", c))
    assert registry.frozen_library("confirmatory", cell, mock=True) == (
        "results/rehearsal/library/nano_v1.npz")
    assert registry.library_model(files[0], ["confirmatory"]).startswith("gpt-")
    with pytest.raises(ConfigError, match="no cell of confirmatory replays x.npz"):
        registry.library_model("x.npz", ["confirmatory"])


def test_plan_line_counts_live_runs_and_warns_of_a_missing_key(protocol, monkeypatch):
    registry = protocol
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    line = registry.plan_line("confirmatory", "T1", 760, 230)
    assert line.startswith("20 live runs, 20,250 planned decisions, 10.12 USD planned "
                           "(tier budget 10.13 USD); WARNING: population.llm.provider_mix."
                           "openai: OPENAI_API_KEY is not set")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert "WARNING" not in registry.plan_line("confirmatory", "T1", 760, 230)


def test_names_and_the_no_tier_label(protocol):
    assert protocol.names() == sorted(p.stem for p in (ROOT / "config/designs").glob("*.yaml"))
    assert protocol.tier_of("exploratory", "share_0") == NO_TIER
