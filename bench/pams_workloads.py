"""Time PAMS on its CI2002 sample (100 FCN agents, 100 + 500 steps) in-process.

Runs in its own environment (PAMS needs numpy < 2); bench_engine.py starts it with
`uv run --no-project --with pams==0.3.0`. Prints one JSON line: per-run seconds and
order messages per run.
"""

import json
import random
import sys
import time

from pams.logs.base import Logger
from pams.runners.sequential import SequentialRunner

CONFIG = {
    "simulation": {
        "markets": ["Market"],
        "agents": ["FCNAgents"],
        "sessions": [
            {"sessionName": 0, "iterationSteps": 100, "withOrderPlacement": True,
             "withOrderExecution": False, "withPrint": False, "hifreqSubmitRate": 1.0},
            {"sessionName": 1, "iterationSteps": 500, "withOrderPlacement": True,
             "withOrderExecution": True, "withPrint": False},
        ],
    },
    "Market": {"class": "Market", "tickSize": 0.00001, "marketPrice": 300.0},
    "FCNAgents": {
        "class": "FCNAgent", "numAgents": 100, "markets": ["Market"], "assetVolume": 50,
        "cashAmount": 10000, "fundamentalWeight": {"expon": [1.0]},
        "chartWeight": {"expon": [0.0]}, "noiseWeight": {"expon": [1.0]},
        "meanReversionTime": {"uniform": [50, 100]}, "noiseScale": 0.001,
        "timeWindowSize": [100, 200], "orderMargin": [0.0, 0.1],
    },
}


class CountingLogger(Logger):
    """Counts order messages, so throughput can be compared per message as well as per run."""

    orders = 0

    def process_order_log(self, log) -> None:
        CountingLogger.orders += 1

    def process_cancel_log(self, log) -> None:
        CountingLogger.orders += 1


def main(repeats: int) -> None:
    times = []
    for seed in range(repeats):
        CountingLogger.orders = 0
        start = time.perf_counter()
        runner = SequentialRunner(settings=CONFIG, prng=random.Random(seed),
                                  logger=CountingLogger())
        runner.main()
        times.append(time.perf_counter() - start)
    print(json.dumps({"times": times, "messages": CountingLogger.orders}))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
