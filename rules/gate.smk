# The budget gate (a checkpoint, so a re-approval never re-runs finished live runs: they take the
# manifest as ancient input) and the reconciliation of spend after each tier.


checkpoint gate:
    input:
        design=design_yaml,
        earlier=earlier_spent,
    output:
        manifest="results/manifests/budget/{design}_{tier}.json",
    log:
        "results/logs/gate/{design}_{tier}.log",
    params:
        plan=gate_plan,
        freeze=freeze_flag,
        pilot_cap=pilot_cap_flag,
        project_cap=WF.project_cap_usd,
        tolerance=WF.reconcile_tolerance,
        t1_min_seeds=WF.t1_min_seeds,
    message:
        "budget gate {wildcards.design}/{wildcards.tier}: {params.plan}"
    shell:
        "ma gate approve {input.design} --tier {wildcards.tier} --out {output.manifest}"
        " --project-cap {params.project_cap} {params.pilot_cap} {params.freeze}"
        " --tolerance {params.tolerance} --t1-min-seeds {params.t1_min_seeds} > {log} 2>&1"


rule reconcile:
    input:
        gate=ancient("results/manifests/budget/{design}_{tier}.json"),
        outcomes=tier_runs_outcomes,
    output:
        spent="results/manifests/budget/{design}_{tier}_spent.json",
    log:
        "results/logs/reconcile/{design}_{tier}.log",
    params:
        design=design_yaml,
    shell:
        "ma gate reconcile {params.design} --tier {wildcards.tier} --out {output.spent}"
        " > {log} 2>&1"
