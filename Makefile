# Set-up is part of every target: on a fresh machine with Python >= 3.11 and pip,
# `make run` and `make test` bring uv, build .venv from uv.lock and do the work.
PYTHON ?= python3
UV := $(PYTHON) -m uv
VENV := .venv/bin
DESIGN ?= exploratory
WORKERS ?= 2

.PHONY: setup run evaluate test test-slurm check lint bench validate clean

setup: $(VENV)/ma

$(VENV)/ma: pyproject.toml uv.lock
	@$(UV) --version >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet uv \
		|| $(PYTHON) -m pip install --quiet --user --break-system-packages uv
	$(UV) sync --all-extras --locked --compile-bytecode
	@touch $@

# The main job on built-in defaults: the protocol's Phase 5a exploratory design (14 cells x
# seeds 1-3) on the mock provider -- no key, no cost -- then its outcomes, one line per cell.
# With RUN_ID, the run
# contract: config/run/$(RUN_ID).yaml's Snakemake target at MODE (sanity|pilot|full), raw inputs
# in results/contract/$(RUN_ID)/$(MODE)/eval_inputs/, then `make evaluate` writes metrics.json.
RUN_ID ?=
MODE ?= sanity
run: setup
ifeq ($(strip $(RUN_ID)),)
	$(VENV)/snakemake --cores $(WORKERS) exploratory
	$(VENV)/ma summary results/runs/exploratory/outcomes.parquet
	$(VENV)/ma plot results/runs/exploratory/outcomes.parquet --outcome volatility
	$(VENV)/ma plot results/runs/exploratory/share_25/seed0001
else
	$(VENV)/python -m src.main --run-id $(RUN_ID) --mode $(MODE)
	$(MAKE) --no-print-directory evaluate RUN_ID=$(RUN_ID) MODE=$(MODE)
endif

evaluate: setup
	$(VENV)/python -m src.evaluate --run-id $(RUN_ID) --mode $(MODE)

test: setup
	$(VENV)/pytest -n $(WORKERS)

# Opt-in: the workflow on a one-node SLURM cluster on this machine (README "On a cluster").
# Needs root; installs Debian's slurmctld, slurmd, slurm-client and munge when missing.
SLURM_PACKAGES := slurmctld slurmd slurm-client munge
test-slurm: setup
	@command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null \
		&& command -v munged >/dev/null || { apt-get update -qq \
		&& DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SLURM_PACKAGES); }
	$(VENV)/pytest tests/pipeline/test_slurm.py --runslurm -n 0 -v

lint: setup
	$(VENV)/ruff check src tests bench

check: lint test

validate: setup
	$(VENV)/ma validate config/baseline.yaml --seeds 20 --workers $(WORKERS)

bench: setup
	$(VENV)/python bench/bench_engine.py

clean:
	rm -rf results .snakemake

# --- the Snakemake workflow (Snakefile, rules/*.smk; README "Workflow") ---
SMK := $(VENV)/snakemake
TARGET ?= exploratory
CORES ?= 2

.PHONY: workflow dryrun dag schema unlock report smoke

workflow: setup  ## make workflow TARGET=tier_T1 CORES=8
	$(SMK) --cores $(CORES) $(TARGET)

dryrun: setup  ## live jobs, planned decisions and USD of TARGET; calls nothing
	$(SMK) -n $(TARGET)

dag: setup  ## results/dag/protocol.{svg,mmd} for the protocol appendix
	$(SMK) --cores 1 dag --forcerun dag

schema: setup  ## regenerate workflow/schemas/*.schema.json after changing a config model
	$(VENV)/ma schema

unlock: setup  ## only when told to (a lock from another host, docs/resume.md): release it
	$(SMK) --unlock $(TARGET)

report: setup  ## Snakemake HTML report (DAG, outcomes, pilot and freeze manifests) of TARGET
	$(SMK) $(TARGET) --report results/report.html

smoke: setup  ## the workflow's free targets on the tiny designs of config/test/, in results/smoke/
	rm -rf results/smoke && mkdir -p results/smoke && cp -r config results/smoke/
	$(SMK) exploratory sigma rehearse_pilot results/runs/exploratory/sensitivity.parquet \
	    --cores $(CORES) --directory results/smoke --configfile config/test/workflow.yaml
