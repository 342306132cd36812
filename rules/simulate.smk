# One job, one process per run: `ma cell --score` writes the run directory
# results/<runs|rehearsal>/<design>/<cell>/seed<NNNN>/ (atomically) and scores it into its
# outcomes.json, as `ma design` does. Live runs have their own rule: they wait for the budget
# gate, are serialized by the `api` resource (`--resources api=K` runs K at once, sharing the
# design's response cache) and never re-run because a gate or design file was touched. Free runs
# use no response cache, as `ma design` (live cells always use the design's), so no outcome
# depends on the order in which jobs ran; rehearsals keep their own cache, the rehearsed
# library's source (rules/library.smk).

ruleorder: simulate_live > simulate


rule simulate:
    input:
        library=W.library_input,
    output:
        **W.run_outputs("runs"),
    log:
        "results/logs/simulate/{design}/{cell}/seed{seed}.log",
    params:
        design=W.design_yaml,
        config_hash=W.cell_hash,
    threads: 1
    shell:
        "{MA} cell {params.design} {wildcards.cell} --seed {wildcards.seed} --score > {log} 2>&1"


rule simulate_live:
    input:
        gate=ancient(W.live_gate),
    output:
        **W.run_outputs("runs"),
    log:
        "results/logs/simulate_live/{design}/{cell}/seed{seed}.log",
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


rule rehearse:
    input:
        library=W.rehearsal_library_input,
        freeze=W.rehearsal_freeze_input,
    output:
        **W.run_outputs("rehearsal"),
    log:
        "results/logs/rehearse/{design}/{cell}/seed{seed}.log",
    params:
        design=W.design_yaml,
        cache=W.rehearsal_cache,
        config_hash=W.rehearsal_cell_hash,
    threads: 1
    shell:
        "{MA} cell {params.design} {wildcards.cell} --seed {wildcards.seed} --mock"
        " --cache {params.cache} --score > {log} 2>&1"
