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
