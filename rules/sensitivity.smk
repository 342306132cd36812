# Re-score saved ticks over the threshold grid (no re-simulation).


rule sensitivity_grid:
    input:
        outcomes="results/runs/{design}/outcomes.parquet",
    output:
        parquet="results/runs/{design}/sensitivity.parquet",
    log:
        "results/logs/sensitivity/{design}.log",
    params:
        design=W.design_yaml,
        partial=W.partial_flag,
    shell:
        "{MA} sensitivity {params.design} {params.partial} > {log} 2>&1"
