"""Time PAMS 0.3.0 in-process on one of two workloads, for bench_engine.py.

    ci2002          PAMS's CI2002 sample: 100 FCN agents, 100 + 500 steps, one FCN order a step
                    (about 600 order messages a run).
    market_makers   like our protocol market: 95 FCN agents and 5 of PAMS's MarketMakerAgents;
                    every step 5 FCN agents order (our 95 traders deciding every 20 ticks) and
                    after each of them one market maker quotes both sides (our 5 makers quoting
                    every tick): about 15 messages a step, 9,000 a run.

Runs in its own environment (PAMS needs numpy < 2); bench_engine.py starts it with
`uv run --no-project --with pams==0.3.0 python bench/pams_workloads.py WORKLOAD RUNS`. Prints one
JSON line: per-run wall and CPU seconds, and order/cancel messages per run.
"""

import copy
import json
import random
import sys
import time
from pathlib import Path

from pams.logs.base import Logger
from pams.runners.sequential import SequentialRunner

# PAMS's CI2002 market, defined once beside the realism report's CI2002 run (a standalone
# script in the package that imports only PAMS).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src" / "market_agents" / "analysis"))
from pams_ci2002 import ci2002  # noqa: E402

# PAMS's CI2002 sample: 100 + 500 steps.
CI2002 = ci2002(500)


def market_makers() -> dict:
    config = copy.deepcopy(CI2002)
    config["simulation"]["agents"] = ["FCNAgents", "MarketMakers"]
    for session in config["simulation"]["sessions"]:
        session.update(maxNormalOrders=5, maxHighFrequencyOrders=1, highFrequencySubmitRate=1.0)
        session.pop("hifreqSubmitRate", None)
    config["FCNAgents"]["numAgents"] = 95
    config["MarketMakers"] = {
        "class": "MarketMakerAgent", "numAgents": 5, "markets": ["Market"],
        "assetVolume": 50, "cashAmount": 10000, "targetMarket": "Market",
        "netInterestSpread": 0.02, "orderTimeLength": 2,
    }
    return config


WORKLOADS = {"ci2002": lambda: CI2002, "market_makers": market_makers}


class CountingLogger(Logger):
    """Counts order messages, so throughput can be compared per message as well as per run."""

    orders = 0

    def process_order_log(self, log) -> None:
        CountingLogger.orders += 1

    def process_cancel_log(self, log) -> None:
        CountingLogger.orders += 1


def main(workload: str, runs: int) -> None:
    config = WORKLOADS[workload]()
    times, cpu, messages = [], [], []
    for seed in range(runs):
        CountingLogger.orders = 0
        start, start_cpu = time.perf_counter(), time.process_time()
        runner = SequentialRunner(settings=copy.deepcopy(config), prng=random.Random(seed),
                                  logger=CountingLogger())
        runner.main()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        messages.append(CountingLogger.orders)
    print(json.dumps({"times": times, "cpu": cpu, "messages": messages}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5)
