import polars as pl

from market_agents.cli import main


def test_summary_prints_one_line_per_cell_with_means(tmp_path, capsys):
    path = tmp_path / "outcomes.parquet"
    pl.DataFrame({
        "cell": ["share_0", "share_0", "k2_25"], "seed": [1, 2, 1],
        "volatility": [0.002, 0.004, 0.005], "spillover_dy": [None, None, 21.5],
        "llm_share_traders": [0.0, 0.0, 0.25],
    }).write_parquet(path)
    assert main(["summary", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["cell", "seeds", "llm", "vol"]
    share0, k2 = lines[1].split(), lines[2].split()
    assert share0 == ["share_0", "2", "0.00", "0.00300"]  # spillover blank: one asset
    assert k2 == ["k2_25", "1", "0.25", "0.00500", "21.5"]


def test_summary_missing_table(tmp_path, capsys):
    assert main(["summary", str(tmp_path / "nope.parquet")]) == 2
    assert "nope.parquet: no such outcomes table" in capsys.readouterr().err
