# Re-score saved ticks over the threshold grid (no re-simulation).


rule sensitivity_grid:
    input:
        outcomes=W.gathered("{design}"),
    output:
        parquet=W.sensitivity_file("{design}"),
    log:
        W.log("sensitivity", "{design}.log"),
    params:
        design=W.design_yaml,
        partial=W.partial_flag,
    shell:
        "{MA} sensitivity {params.design} {params.partial} > {log} 2>&1"
