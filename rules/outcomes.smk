# Score each run from its saved files, then gather a design into outcomes.parquet.


rule outcomes:
    input:
        manifest=W.run_outputs("{kind}")["manifest"],
        ticks=W.run_outputs("{kind}")["ticks"],
    output:
        outcomes="results/{kind}/{design}/{cell}/seed{seed}/outcomes.json",
    log:
        "results/logs/outcomes/{kind}/{design}/{cell}/seed{seed}.log",
    params:
        run=W.run_path,
    shell:
        "{MA} outcomes {params.run} > {log} 2>&1"


rule gather:
    input:
        outcomes=W.design_outcomes,
    output:
        parquet="results/{kind}/{design}/outcomes.parquet",
    log:
        "results/logs/gather/{kind}/{design}.log",
    params:
        design=W.design_yaml,
        flags=W.gather_flags,
    shell:
        "{MA} gather {params.design} {params.flags} > {log} 2>&1"
