"""A classical run loads nothing of the LLM layer (issue 26): `ma run` on a config without LLM
slots imports no ``market_agents.llm`` module, nor asyncio, ssl or sqlite3 (which only the LLM
client and the response cache need); a run with LLM slots still loads and runs them. What the
classical path keeps its own copy of (the zero usage record, the prompt revision names) agrees
with the LLM layer's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from market_agents.config_llm import PROMPT_REVISIONS, PROMPT_VERSION
from market_agents.llm import prompting
from market_agents.llm.client import LLMClient
from market_agents.prices import load_prices
from market_agents.sim.rundir import NO_LLM_USAGE, classical_llm_fields
from tests.support import ROOT

# Runs `ma` as its console script does, then prints the modules the process loaded.
WRAPPER = ("import json, sys\n"
           "from market_agents.cli import main\n"
           "code = main(sys.argv[1:])\n"
           "print(json.dumps(sorted(sys.modules)))\n"
           "sys.exit(code)\n")
LLM_ONLY = ("asyncio", "ssl", "sqlite3")


def ma_modules(*args: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", WRAPPER, *args], capture_output=True,
                          text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def llm_layer(modules: list[str]) -> list[str]:
    return [m for m in modules if m == "market_agents.llm" or m.startswith("market_agents.llm.")
            or m.split(".")[0] in LLM_ONLY]


def test_a_classical_run_imports_no_llm_module(tmp_path: Path):
    out = tmp_path / "run"
    modules = ma_modules("run", "config/baseline.yaml", "--seed", "1", "--out", str(out),
                         "--quiet")
    assert (out / "manifest.json").is_file()
    assert "market_agents.sim.simulation" in modules  # the run happened in this process
    assert llm_layer(modules) == []
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["llm_usage"] == NO_LLM_USAGE and manifest["prompt_version"] is None


def test_a_run_with_llm_slots_still_loads_the_llm_layer(tmp_path: Path):
    out = tmp_path / "run"
    modules = ma_modules("run", "config/baseline.yaml", "--seed", "1", "--out", str(out),
                         "--quiet", "--set", "population.llm_share=0.05")
    assert {"market_agents.llm.client", "market_agents.agents.llm_trader"} <= set(modules)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["n_llm_agents"] > 0 and manifest["llm_usage"]["requests"] > 0


def test_the_classical_manifest_fields_are_what_a_client_without_requests_reports():
    prices = load_prices()
    assert NO_LLM_USAGE == LLMClient({}, prices).usage_summary()
    assert classical_llm_fields()["price_assumptions"] == {"price_table": prices.provenance()}


def test_the_configs_prompt_revisions_are_the_frozen_prompts():
    assert PROMPT_REVISIONS == tuple(prompting.REVISIONS)
    assert PROMPT_VERSION == prompting.PROMPT_VERSION
