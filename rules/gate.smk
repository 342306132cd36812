# The budget gate (a checkpoint, so a re-approval never re-runs finished live runs: they take the
# manifest as ancient input) and the reconciliation of spend after each tier.


checkpoint gate:
    input:
        design=W.design_yaml,
        earlier=W.earlier_spent,
    output:
        manifest=W.gate_manifest("{design}", "{tier}"),
    log:
        W.log("gate", "{design}_{tier}.log"),
    params:
        plan=W.gate_plan,
        freeze=W.freeze_flag,
        pilot_cap=W.pilot_cap_flag,
        project_cap=WF.project_cap_usd,
        tolerance=WF.reconcile_tolerance,
        t1_min_seeds=WF.t1_min_seeds,
    message:
        "budget gate {wildcards.design}/{wildcards.tier}: {params.plan}"
    shell:
        "{MA} gate approve {input.design} --tier {wildcards.tier} --out {output.manifest}"
        " --project-cap {params.project_cap} {params.pilot_cap} {params.freeze}"
        " --tolerance {params.tolerance} --t1-min-seeds {params.t1_min_seeds} > {log} 2>&1"


rule reconcile:
    input:
        gate=ancient(rules.gate.output.manifest),
        outcomes=W.tier_runs_outcomes,
    output:
        spent=W.spent("{design}", "{tier}"),
    log:
        W.log("reconcile", "{design}_{tier}.log"),
    params:
        design=W.design_yaml,
    shell:
        "{MA} gate reconcile {params.design} --tier {wildcards.tier} --out {output.spent}"
        " > {log} 2>&1"
