# One job per run directory results/<runs|rehearsal>/<design>/<cell>/seed<NNNN>/ (written
# atomically by `ma cell`). Live runs have their own rule: they wait for the budget gate, are
# serialized by the `api` resource and never re-run because a gate or design file was touched.

ruleorder: simulate_live > simulate


rule simulate:
    input:
        library=library_input,
    output:
        **run_outputs("results/runs"),
    log:
        "results/logs/simulate/{design}/{cell}/seed{seed}.log",
    params:
        design=design_yaml,
        cache=cache_file,
        config_hash=cell_hash,
    threads: 1
    shell:
        "ma cell {params.design} {wildcards.cell} --seed {wildcards.seed}"
        " --cache {params.cache} > {log} 2>&1"


rule simulate_live:
    input:
        gate=ancient(live_gate),
    output:
        **run_outputs("results/runs"),
    log:
        "results/logs/simulate_live/{design}/{cell}/seed{seed}.log",
    params:
        design=design_yaml,
        cache=cache_file,
    wildcard_constraints:
        design=LIVE_DESIGNS,
        cell=LIVE_CELLS,
    resources:
        api=1,
    threads: 1
    message:
        "live run {wildcards.design}/{wildcards.cell}/seed{wildcards.seed} (paid API calls)"
    shell:
        "ma gate check {input.gate} --cell {wildcards.cell} --seed {wildcards.seed} > {log} 2>&1"
        " && ma cell {params.design} {wildcards.cell} --seed {wildcards.seed}"
        " --cache {params.cache} >> {log} 2>&1"


rule rehearse:
    input:
        library=rehearsal_library_input,
    output:
        **run_outputs("results/rehearsal"),
    log:
        "results/logs/rehearse/{design}/{cell}/seed{seed}.log",
    params:
        design=design_yaml,
        cache=rehearsal_cache,
        config_hash=rehearsal_cell_hash,
    threads: 1
    shell:
        "ma cell {params.design} {wildcards.cell} --seed {wildcards.seed} --mock"
        " --cache {params.cache} > {log} 2>&1"
