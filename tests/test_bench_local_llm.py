"""`make demo-local-llm` counts the valid limit prices outside the schema's band (issue 27),
classed by `llm.structured.band_class`."""

from __future__ import annotations

import importlib.util

import polars as pl

from tests.support import ROOT


def _bench():
    spec = importlib.util.spec_from_file_location("bench_local_llm",
                                                  ROOT / "bench" / "bench_local_llm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_demo_counts_limit_prices_outside_the_band(tmp_path):
    pl.DataFrame({"tick": [0, 1, 2, 3], "asset": [0] * 4,
                  "mid_price": [100.0, 100.0, 120.0, 120.0]}).write_parquet(
        tmp_path / "ticks.parquet")
    # band of a mid of 100: [50, 200]; of 120: [60, 240]
    dec = pl.DataFrame({"tick": [0, 1, 2, 3, 3], "valid": [True, True, True, False, True],
                        "price": [49.0, 200.0, 250.0, 999.0, None]})
    figures = _bench().band_figures(tmp_path, dec)
    assert figures == {"limit_prices": 3, "limit_prices_out_of_band": 2,
                       "out_of_band_rate": 0.6667}


def test_the_demo_counts_vf_evals_errored_episodes_apart(tmp_path):
    import json

    saved = tmp_path / "evals" / "bazaar--m" / "abc" / "results.jsonl"
    saved.parent.mkdir(parents=True)
    rows = [{"reward": 1.0051, "error": None, "bazaar_errored": 0.0, "num_turns": 5.0},
            {"reward": 0.0, "error": {"error": "ModelError"}, "bazaar_errored": 1.0,
             "num_turns": 0.0}]
    saved.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = _bench().vf_figures(tmp_path)
    assert got == {"episodes": 2, "completed": 1, "errored": 1, "turns": [5.0, 0.0],
                   "rewards": [1.0051, 0.0]}


def test_the_build_prints_progress_and_fails_with_the_logs_tail(tmp_path, capsys):
    """pip's verbose CMake output becomes one line per tenth of the steps; a failed build
    ends with its last lines and where the whole log is."""
    import pytest

    bench = _bench()
    py = tmp_path / "env" / "bin" / "python"
    py.parent.mkdir(parents=True)
    steps = "".join(f"echo '  [{k}/40] compiling x{k}.cpp'; " for k in range(1, 41))
    py.write_text(f"#!/bin/sh\necho 'Collecting llama-cpp-python'; {steps}"
                  "echo 'Successfully installed llama-cpp-python'; exit 0\n")
    py.chmod(0o755)
    bench.pip_install(py, ["x"], {"PATH": "/usr/bin:/bin"})
    out = capsys.readouterr().out
    assert out.count("building llama.cpp: step") == 11  # 1/40, then every tenth, 40/40
    assert "step 40/40" in out and "Successfully installed" in out
    # where docs/local_models.md says: .local-llm/pip.log beside .local-llm/venv
    assert (tmp_path / "pip.log").read_text().count("compiling") == 40
    py.write_text("#!/bin/sh\necho 'error: compiler died'; exit 1\n")
    with pytest.raises(SystemExit, match="compiler died"):
        bench.pip_install(py, ["x"], {"PATH": "/usr/bin:/bin"})


def test_the_build_says_where_it_is_at_least_once_a_minute(tmp_path, capsys, monkeypatch):
    """A step that compiles for minutes still gets a line a minute naming the step (issue 37:
    one line every ~10 minutes on a loaded machine); here a minute is 0.05 s."""
    bench = _bench()
    monkeypatch.setattr(bench, "SAY_EVERY_S", 0.05)
    py = tmp_path / "env" / "bin" / "python"
    py.parent.mkdir(parents=True)
    py.write_text("#!/bin/sh\necho '  [3/40] compiling ggml.c'; sleep 0.6; exit 0\n")
    py.chmod(0o755)
    bench.pip_install(py, ["x"], {"PATH": "/usr/bin:/bin"})
    out = capsys.readouterr().out
    assert "still building llama.cpp: step 3/40" in out and "still still" not in out, out
