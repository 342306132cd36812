# Score each run from its saved files, then gather a design into outcomes.parquet.


rule outcomes:
    input:
        manifest="results/{kind}/{design}/{cell}/seed{seed}/manifest.json",
        ticks="results/{kind}/{design}/{cell}/seed{seed}/ticks.parquet",
    output:
        outcomes="results/{kind}/{design}/{cell}/seed{seed}/outcomes.json",
    log:
        "results/logs/outcomes/{kind}/{design}/{cell}/seed{seed}.log",
    params:
        run=run_path,
    shell:
        "ma outcomes {params.run} > {log} 2>&1"


rule gather:
    input:
        outcomes=design_outcomes,
    output:
        parquet=report("results/{kind}/{design}/outcomes.parquet",
                       caption="../workflow/report/outcomes.rst", category="Outcomes"),
    log:
        "results/logs/gather/{kind}/{design}.log",
    params:
        design=design_yaml,
        flags=gather_flags,
    shell:
        "ma gather {params.design} {params.flags} > {log} 2>&1"
