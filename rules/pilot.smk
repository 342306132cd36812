# Phase 5b: the live pilot's manifest (cost, validity, latency, σ̂_d table, pass/fail).


rule pilot_manifest:
    input:
        outcomes=W.gathered(WF.pilot),
        spent=W.spent(WF.pilot, NO_TIER),
    output:
        manifest=report("results/manifests/pilot.json", caption="../workflow/report/pilot.rst",
                        category="Manifests"),
    log:
        "results/logs/pilot.log",
    params:
        design=W.design_file(WF.pilot),
        control=WF.control,
        usd_per_decision=WF.planning_usd_per_decision,
    shell:
        "{MA} pilot {params.design} --outcomes {input.outcomes} --out {output.manifest}"
        " --control {params.control} --usd-per-decision {params.usd_per_decision} > {log} 2>&1"
