"""Issue 35's targets against each other, on GARCH(1,1) series (docs/market.md, "The same
conflict without any calendar"): for a grid of GARCH(1,1) processes (unpredictable by
construction), the median over 549-return samples (a 600-tick run's, after its burn-in) of
the mean raw acf(|r|) over lags 1–10, the excess kurtosis and the Hill index, and the share
of samples in which Ljung–Box (lags 1–10, 5 %) rejects. A row marked ``meets`` meets the
first three targets.

    .venv/bin/python bench/ljung_box_grid.py [--samples 300]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.analysis.test_realism import _garch_paths  # noqa: E402

from market_agents.analysis import realism  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=300, help="samples per process")
    samples = parser.parse_args().samples
    print("nu   persistence alpha  acf|r|  kurt  Hill   LB rejects")
    for nu in (np.inf, 8, 5):
        for persistence in (0.9, 0.95, 0.98, 0.995):
            for alpha in (0.03, 0.06, 0.1, 0.15, 0.2, 0.3):
                rng = np.random.default_rng(35)
                paths = _garch_paths(549, samples, rng, alpha, persistence, nu=nu)
                acf = np.median([np.mean(realism.acf_many(np.abs(r), 10)) for r in paths])
                kurt = np.median([np.mean((r - r.mean()) ** 4) / r.var() ** 2 - 3
                                  for r in paths])
                hill = np.median([realism.hill(np.abs(r))[0] for r in paths])
                lb = np.mean([realism.ljung_box(r, 10)[1] < 0.05 for r in paths])
                meets = acf >= 0.05 and kurt > 3 and 2 < hill < 5
                print(f"{nu:<4} {persistence:<11} {alpha:<5} {acf:6.3f} {kurt:5.1f} "
                      f"{hill:5.2f}  {lb:5.0%}{'  meets' if meets else ''}", flush=True)


if __name__ == "__main__":
    main()
