"""Issue 11: every JSON file the project writes is strict JSON: a strict parser (no NaN, no
Infinity) reads each file that a design, a run and Bazaar's play and eval leave behind."""

from __future__ import annotations

import polars as pl
import pytest

from market_agents.cli import main
from market_agents.sim.rundir import SCHEMAS, TABLES, write_files
from tests.support import ROOT, strict_loads


def test_every_json_file_written_is_strict(tmp_path, capsys):
    results = tmp_path / "results"
    assert main(["design", str(ROOT / "config/test/designs/exploratory.yaml"), "--mock",
                 "--results", str(results), "--workers", "1", "--quiet"]) == 0
    assert main(["run", str(ROOT / "config/baseline.yaml"), "--seed", "3", "--quiet", "--out",
                 str(tmp_path / "run"), "--set", "simulation.ticks=100", "--set",
                 "shocks=[{time: 60, kind: fundamental_jump, size: -12.5}]", "--set",
                 "treatment={label: x, size: 0.25, flag: true}"]) == 0
    assert main(["bazaar", "play", "--tier", "maker_micro", "--policy", "vol_aware", "--out",
                 str(tmp_path / "play")]) == 0
    assert main(["bazaar", "eval", "--tier", "micro", "--provider", "mock", "--seeds", "2",
                 "--out", str(tmp_path / "eval")]) == 0
    capsys.readouterr()
    files = sorted(p for p in tmp_path.rglob("*") if p.suffix in (".json", ".jsonl"))
    kinds = {p.name for p in files}
    assert {"manifest.json", "outcomes.json", "summary.json", "transcript.jsonl",
            "transcripts.jsonl"} <= kinds, kinds
    for path in files:
        text = path.read_text()
        docs = text.splitlines() if path.suffix == ".jsonl" else [text]
        for doc in docs:
            strict_loads(doc)
    manifest = strict_loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["treatment"] == {"flag": True, "label": "x", "size": 0.25}


def test_the_manifest_writer_refuses_a_non_finite_number(tmp_path):
    tables = {name: pl.DataFrame(schema=SCHEMAS[name]) for name in TABLES}
    # issue 33: named by file and key (atomic.NotJSON, a ValueError), before any file is written
    with pytest.raises(ValueError, match=r"^manifest\.json: x is nan: JSON holds finite"):
        write_files(tmp_path, "", tables, {"x": float("nan")})
    assert list(tmp_path.iterdir()) == []
