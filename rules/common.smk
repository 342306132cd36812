# The one object every rule names its files, input functions and parameters through
# (market_agents.pipeline.workflow, unit-tested in tests/pipeline); the rules hold no logic. Every
# path under results/ comes from market_agents.layout.
# Rules run `ma` as {MA}: the interpreter Snakemake runs in, activated or not.

import os

from market_agents import layout
from market_agents.pipeline import holder
from market_agents.pipeline.workflow import Workflow, plain_params
from market_agents.protocol import tiers
from market_agents.protocol.tiers import NO_TIER, TIER_PATTERN, TIERS

# One live invocation per directory; a killed one's lock is released by the next (README
# "After a kill"; market_agents.pipeline.holder).
holder.guard(workflow)
# Job params stored without importing pandas (0.4 CPU s of every invocation; no param is a
# DataFrame): market_agents.pipeline.workflow.plain_params.
plain_params()

W = Workflow(config)
WF = W.config
MA = W.ma
# A free run deleted (or changed) under its batch record voids the record, so its batch and
# the gather after it are made again (market_agents.pipeline.workflow).
W.vet_batch_records()
# The serving switches of this invocation (`--config replay=true`, `new_cache=true`) reach every
# `ma` job through the environment, not as rule parameters (toggling them re-runs nothing).
W.export_serving_switches()
# The guards of every paying `ma` job (caps, the pilot and confirmatory designs, `--config
# deviation=...`) reach it through the environment, not as rule parameters (a new deviation
# re-runs nothing); docs/guards.md.
os.environ.update(WF.guard_env())
