"""PAMS 0.3.0's CI2002 market (Chiarella & Iori 2002, PAMS's sample of it: 100 FCN agents,
one order a step) run for the realism report of ``ma validate --pams``.

A standalone script for PAMS's own environment (PAMS needs numpy < 2; it imports nothing of
market_agents): ``uv run --no-project --with pams==0.3.0 python pams_ci2002.py TICKS SEED...``
prints one JSON line per seed with the per-step ``mid`` (mid price, the market price where a
side of the book is empty), ``fundamental`` and ``volume`` of the steps after PAMS's 100-step
order-placement session: the same series ``ma validate`` measures of our market.
"""

import copy
import json
import random
import sys

from pams.logs.base import Logger
from pams.runners.sequential import SequentialRunner

# PAMS's CI2002 sample (pams/samples/CI2002/config.json), with the execution session's length
# set to the run length.
FCN = {
    "class": "FCNAgent", "numAgents": 100, "markets": ["Market"], "assetVolume": 50,
    "cashAmount": 10000, "fundamentalWeight": {"expon": [1.0]},
    "chartWeight": {"expon": [0.0]}, "noiseWeight": {"expon": [1.0]},
    "meanReversionTime": {"uniform": [50, 100]}, "noiseScale": 0.001,
    "timeWindowSize": [100, 200], "orderMargin": [0.0, 0.1],
}
WARM_UP = 100


def ci2002(steps: int) -> dict:
    """The CI2002 configuration with an execution session of ``steps`` steps."""
    return {
        "simulation": {"markets": ["Market"], "agents": ["FCNAgents"], "sessions": [
            {"sessionName": 0, "iterationSteps": WARM_UP, "withOrderPlacement": True,
             "withOrderExecution": False, "withPrint": False, "hifreqSubmitRate": 1.0},
            {"sessionName": 1, "iterationSteps": steps, "withOrderPlacement": True,
             "withOrderExecution": True, "withPrint": False},
        ]},
        "Market": {"class": "Market", "tickSize": 0.00001, "marketPrice": 300.0},
        "FCNAgents": FCN,
    }


def main(steps: int, seeds: list[int]) -> None:
    """Run CI2002 for ``steps`` steps on each seed and print one JSON line per seed."""
    for seed in seeds:
        runner = SequentialRunner(settings=copy.deepcopy(ci2002(steps)),
                                  prng=random.Random(seed), logger=Logger())
        runner.main()
        market = runner.simulator.markets[0]
        times = range(WARM_UP, WARM_UP + steps)
        market_price = [market.get_market_price(t) for t in times]
        mids = []
        for t, p in zip(times, market_price, strict=True):
            mid = market.get_mid_price(t)
            mids.append(p if mid is None else mid)
        print(json.dumps({
            "seed": seed, "mid": mids,
            "fundamental": [market.get_fundamental_price(t) for t in times],
            "volume": [market.get_executed_volume(t) for t in times],
        }))


if __name__ == "__main__":
    main(int(sys.argv[1]), [int(s) for s in sys.argv[2:]])
