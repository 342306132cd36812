"""The example plug-in (examples/plugin/, docs/extending.md), installed as a package installs:
a distribution on the path whose entry points are those its pyproject.toml declares. Its
trader type takes a share of the mix and its mechanism acts; both are found in a run, in
``ma outcomes``, in ``ma summary`` and in the paper, with no edit of market_agents; without it
the same config is refused in one line. (Installing it with pip is what `make test-docs` does
with docs/extending.md's commands in a scratch clone.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import polars as pl
import pytest
import yaml

from tests.support import ROOT

PLUGIN = ROOT / "examples" / "plugin"
SETS = ["--set", "population.mix.contrarian=0.1", "--set", "population.mix.noise=0.3",
        "--set", "exchange.price_band=0.01"]


def install(site: Path) -> dict[str, str]:
    """A dist-info for the plug-in on a path of its own, built from its pyproject.toml (what
    pip writes), and the environment that puts it and the plug-in's source on sys.path."""
    project = tomllib.loads((PLUGIN / "pyproject.toml").read_text())["project"]
    info = site / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\n"
                                   f"Version: {project['version']}\n")
    groups = project["entry-points"]
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n"
        for group, eps in groups.items()))
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(PLUGIN)])}


def ma(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None):
    return subprocess.run([sys.executable, "-m", "market_agents.cli", *args], env=env,
                          cwd=cwd, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    return install(tmp_path_factory.mktemp("site"))


def test_without_the_plugin_its_type_is_refused_in_one_line(tmp_path):
    out = ma("run", str(ROOT / "config" / "baseline.yaml"), "--seed", "1", "--out",
             str(tmp_path / "run"), *SETS)
    assert out.returncode == 2 and not (tmp_path / "run").exists()
    line = out.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert "population.mix" in line and "unknown trader type 'contrarian'" in line


def test_installed_its_type_trades_and_its_mechanism_acts(env, tmp_path):
    run = tmp_path / "run"
    out = ma("run", str(ROOT / "config" / "baseline.yaml"), "--seed", "1", "--out", str(run),
             *SETS, env=env)
    assert out.returncode == 0, out.stderr
    agents = pl.read_parquet(run / "agents.parquet")
    assert agents.filter(pl.col("type") == "contrarian").height == 9  # 10 % of 95, rounded down
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["mechanisms"] == ["price_band"] and manifest["mechanisms_idle"] == []
    assert "price_band" in manifest["reject_reasons"]
    assert dict(manifest["activity"])["band_refusals"] > 0
    scored = ma("outcomes", str(run), "--print", env=env)
    assert scored.returncode == 0, scored.stderr
    outcomes = json.loads((run / "outcomes.json").read_text())
    assert outcomes["band_refusals"] == outcomes["rejects_price_band"] > 0
    assert outcomes["mechanisms"] == "price_band"


def test_its_run_names_the_plugins_code_in_its_fingerprint(env, tmp_path):
    code = ("from market_agents.sim.fingerprint import fingerprint, plugin_files; "
            "print(fingerprint()); print(sorted(plugin_files()))")
    plain = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True).stdout.split("\n")
    installed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               env=env, check=True).stdout.split("\n")
    assert plain[0] != installed[0]
    assert installed[1] == "['plugin:ma_example_plugin.contrarian', " \
                           "'plugin:ma_example_plugin.price_band']"


def test_a_design_with_it_shows_it_in_the_summary_and_the_paper(env, tmp_path):
    design = tmp_path / "config" / "designs" / "plugin.yaml"
    design.parent.mkdir(parents=True)
    design.write_text(yaml.safe_dump({
        "name": "plugin", "base": str(ROOT / "config" / "baseline.yaml"),
        "prices": str(ROOT / "config" / "prices.yaml"), "seeds": "1-2",
        "overrides": {"simulation.ticks": 200, "simulation.burn_in": 20},
        "budget": {"cap_usd": 0.0},
        "cells": [{"name": "share_0"},
                  {"name": "band_0", "overrides": {
                      "population.mix.contrarian": 0.1, "population.mix.noise": 0.3,
                      "exchange.price_band": 0.01}}]}))
    results = tmp_path / "results"
    made = ma("design", str(design), "--results", str(results), "--workers", "1", "--quiet",
              env=env, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    table = results / "runs" / "plugin" / "outcomes.parquet"
    summary = ma("summary", str(table), env=env)
    assert summary.returncode == 0, summary.stderr
    activity = summary.stdout.split("mechanism activity")[1]
    assert "band" in activity and "rej:band" in activity and "price_band 2/2" in activity
    paper = ma("paper", "--design", "plugin", "--designs-dir", str(design.parent),
               "--results", str(results), "--out", str(tmp_path / "paper"), "--quiet",
               env=env, cwd=tmp_path)
    assert paper.returncode == 0, paper.stderr
    written = pl.read_csv(tmp_path / "paper" / "tables" / "mechanism_activity.csv",
                          comment_prefix="#")
    assert {"band_refusals", "rejects_price_band"} <= set(written.columns)
    band = written.filter(pl.col("cell") == "band_0")
    assert band["band_refusals"][0] > 0
    assert "price_band acted on 2 of 2 seeds" in band["acted (seeds)"][0]
