# Free and rehearsed runs (no paid call: classical, mock and library cells, and a rehearsal's
# every cell, its live routes served by the mock): one job, one process per batch of up to
# `runs_per_job` runs (config/workflow.yaml), cells x seeds: a cell's seeds in chunks, and the
# cells with the same chunk together, in batches of even sizes (batches.plan_batches); each
# tier's cells apart, the cells that replay a frozen library apart and the equal-USD cells apart
# (Workflow._batches). `ma cell CELL… --seed S1 S2 ... --score` writes each run directory
# results/{runs,rehearsal}/<design>/<cell>/seed<NNNN>/ (atomically) and its outcomes.json, as
# `ma design` does, then results/{runs,rehearsal}/<design>/runs_<first>-<last>_<key>.json, the
# job's output (key: the cells' config hashes and the code, so a changed cell asks for a new
# record, with or without .snakemake's records). A finished run is kept (a killed job resumes
# where it stopped, and an unchanged cell's runs are not made again); one made from another
# config, paid for nothing, is run again; making a run removes the records that named it. Free
# runs use no response cache, as in `ma design`, so no outcome depends on the order in which
# jobs ran; a rehearsal keeps its own, the rehearsed library's source (rules/library.smk).
# Live runs have their own rule, one job per run: they wait for the budget gate, are serialized
# by the `api` resource (`--resources api=K` runs K at once, sharing the design's response cache)
# and never re-run because a gate or design file was touched.


rule simulate:
    input:
        library=W.library_input,
        freeze=W.freeze_input,
    output:
        runs=W.batch_record,
    log:
        W.log("simulate", "{kind}", "{design}", "runs_{first}-{last}_{chash}.log"),
    params:
        design=W.design_yaml,
        cells=W.batch_cells,
        seeds=W.batch_seeds,
        serving=W.batch_serving,
    wildcard_constraints:
        first=r"\d+",
        last=r"\d+",
        chash=r"[0-9a-f]{12}",
    threads: 1
    shell:
        "{MA} cell {params.design} {params.cells} --seed {params.seeds} {params.serving} --score"
        " --replace-stale --runs-file {output.runs} > {log} 2>&1"


# Its shell text is part of every finished live run's Snakemake record: a changed text re-runs
# them all (tests/pipeline/test_rules.py, LIVE_SHELL).
rule simulate_live:
    input:
        gate=ancient(W.live_gate),
    output:
        **W.run_outputs("runs"),
    log:
        W.log("simulate_live", "{design}", "{cell}", "seed{seed}.log"),
    params:
        design=W.design_yaml,
        cache=W.cache_file,
    wildcard_constraints:
        design=W.live_designs,
        cell=W.live_cells,
    resources:
        api=1,
    threads: 1
    message:
        "live run {wildcards.design}/{wildcards.cell}/seed{wildcards.seed} (paid API calls)"
    shell:
        "{MA} gate check {input.gate} --cell {wildcards.cell} --seed {wildcards.seed} > {log} 2>&1"
        " && {MA} cell {params.design} {wildcards.cell} --seed {wildcards.seed}"
        " --cache {params.cache} --score >> {log} 2>&1"
