import polars as pl

from market_agents.cli import main
from market_agents.config import load_config
from market_agents.sim.runner import run_to_dir

PNG = b"\x89PNG\r\n\x1a\n"


def test_run_figure_from_saved_files(tmp_path, baseline_path, capsys):
    cfg = load_config(baseline_path, ["simulation.ticks=120", "exchange.halt_threshold=0.01",
                                      "shocks=[{time: 60, kind: placebo}]"])
    run = run_to_dir(cfg, 1, tmp_path / "cell" / "seed0001", progress=False)
    assert main(["plot", str(run)]) == 0
    png = run / "price.png"
    assert png.read_bytes()[:8] == PNG and png.stat().st_size > 10_000
    assert "wrote" in capsys.readouterr().out


def test_design_figure_and_bad_outcome(tmp_path, capsys):
    path = tmp_path / "outcomes.parquet"
    pl.DataFrame({"cell": ["a", "a", "b"], "seed": [1, 2, 1],
                  "volatility": [0.1, 0.2, None]}).write_parquet(path)
    assert main(["plot", str(path), "--outcome", "volatility"]) == 0
    assert (tmp_path / "volatility.png").read_bytes()[:8] == PNG
    assert main(["plot", str(path), "--outcome", "nope"]) == 2
    assert "--outcome nope: not a column" in capsys.readouterr().err


def test_not_a_run_dir(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["plot", str(tmp_path / "empty")]) == 2
    assert "not a complete run directory" in capsys.readouterr().err


def test_run_figure_marks_margin_calls(tmp_path, baseline_path, monkeypatch):
    import json

    from market_agents.analysis import figures

    labels = []
    real = figures._save

    def spy(fig, out, plt):
        labels.extend(line.get_label() for ax in fig.axes for line in ax.get_lines())
        return real(fig, out, plt)

    monkeypatch.setattr(figures, "_save", spy)
    run = run_to_dir(load_config(baseline_path, ["simulation.ticks=120"]), 1, tmp_path / "r",
                     progress=False)
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps(
        {**manifest, "mechanism_events": {"leverage": [[70, 12], [71, 30]]}}))
    figures.run_figure(run, run / "price.png")
    assert "leverage (2)" in labels
