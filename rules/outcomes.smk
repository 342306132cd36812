# Gather a design's outcomes.json files (written by the run rules, rules/simulate.smk) into
# outcomes.parquet.


rule gather:
    input:
        outcomes=W.design_outcomes,
        sources=W.gather_sources,
    output:
        parquet=W.gathered("{design}", kind="{kind}"),
    log:
        W.log("gather", "{kind}", "{design}.log"),
    params:
        design=W.design_yaml,
        flags=W.gather_flags,
    shell:
        "{MA} gather {params.design} {params.flags} > {log} 2>&1"


# What a tier's step reports: its runs gathered with the control's (share_0 is in T1). The
# inputs already hold every run the gate did not cut, hence --allow-missing.
rule gather_tier:
    input:
        outcomes=W.tier_outcomes,
    output:
        parquet=W.gathered("{design}", tier="{tier}", kind="{kind}"),
    log:
        W.log("gather", "{kind}", "{design}_{tier}.log"),
    params:
        design=W.design_yaml,
        flags=W.gather_flags,
        control=WF.control,
    shell:
        "{MA} gather {params.design} --tier {wildcards.tier} --control {params.control}"
        " --allow-missing {params.flags} > {log} 2>&1"


# The free σ estimates (§3): the control SD of every outcome.
rule control_sd:
    input:
        outcomes=W.gathered("{design}"),
    output:
        parquet=W.control_sd_file("{design}"),
    log:
        W.log("control_sd", "{design}.log"),
    params:
        design=W.design_yaml,
        control=WF.control,
    shell:
        "{MA} sigma {params.design} --control {params.control} > {log} 2>&1"
