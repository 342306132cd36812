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


def test_summary_prints_mechanism_activity_and_flags_idle_mechanisms(tmp_path, capsys):
    path = tmp_path / "outcomes.parquet"
    pl.DataFrame({
        "cell": ["leverage_25"] * 3 + ["breaker_25"] * 2 + ["share_0"],
        "seed": [101, 102, 103, 101, 102, 101],
        "volatility": [0.004] * 6,
        "n_halts": [0, 0, 0, 0, 0, 0], "halted_ticks": [0] * 6,
        "rejects_position_limit": [0] * 6, "rejects_insufficient_funds": [3, 4, 5, 1, 1, 1],
        "margin_calls": [2, 0, 1, 0, 0, 0], "forced_sale_volume": [40, 0, 20, 0, 0, 0],
        "llm_channel_read": [0, 0, 0, 0, 0, None],
        "mechanisms": ["leverage"] * 3 + ["breaker"] * 2 + [""],
        "mechanisms_idle": ["", "leverage", ""] + ["breaker"] * 2 + [""],
    }).write_parquet(path)
    assert main(["summary", str(path), "--runs"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.strip()}
    head = out.splitlines()[out.splitlines().index("") + 2].split()
    assert head[:6] == ["cell", "halts", "halted", "rej:limit", "rej:funds", "margin"]
    assert rows["leverage_25"][-2:] == ["leverage", "2/3"] and rows["leverage_25"][5] == "1.00"
    assert rows["share_0"][-1] == "-"
    assert rows["leverage_25/102"][5] == "0.00"  # --runs: one line per run
    flags = [line for line in out.splitlines() if line.startswith("FLAG")]
    assert flags == ["FLAG breaker_25: breaker is switched on but acted in none of its 2 "
                     "seed(s)"]


def test_summary_says_the_usd_column_is_priced_not_paid(tmp_path, capsys):
    """The mock's answers are priced at the price table too; the summary says what was paid."""
    path = tmp_path / "outcomes.parquet"
    pl.DataFrame({"cell": ["mock_25", "live_25"], "seed": [1, 1], "llm_usd": [0.3, 0.2],
                  "llm_usd_spent": [0.0, 0.125]}).write_parquet(path)
    assert main(["summary", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].split()[-1] == "0.3000" and out[3] == (
        "USD: the answers at the price table (config/prices.yaml), as if bought live; "
        "paid: 0.1250 USD in all (llm_usd_spent)")
