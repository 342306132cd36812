# Phase 5b: the live pilot's manifest (cost, validity, latency, σ̂_d table, pass/fail), the
# rehearsal's from mock answers, and the failure path's re-pilot (§4).


rule pilot_manifest:
    input:
        outcomes=W.gathered(WF.pilot),
        spent=W.spent(WF.pilot, NO_TIER),
    output:
        manifest=report(W.manifest("pilot"), caption="../workflow/report/pilot.rst",
                        category="Manifests"),
    log:
        W.log("pilot.log"),
    params:
        design=W.design_file(WF.pilot),
        control=WF.control,
        usd_per_decision=WF.planning_usd_per_decision,
    shell:
        "{MA} pilot {params.design} --outcomes {input.outcomes} --out {output.manifest}"
        " --control {params.control} --usd-per-decision {params.usd_per_decision} > {log} 2>&1"


rule rehearse_pilot_manifest:
    input:
        outcomes=W.gathered(WF.pilot, mock=True),
    output:
        manifest=W.manifest("pilot", mock=True),
    log:
        W.log("rehearse_pilot.log"),
    params:
        design=W.design_file(WF.pilot),
        control=WF.control,
        usd_per_decision=WF.planning_usd_per_decision,
    shell:
        "{MA} pilot {params.design} --mock --outcomes {input.outcomes} --out {output.manifest}"
        " --control {params.control} --usd-per-decision {params.usd_per_decision} > {log} 2>&1"


# The failure path (§4): the re-pilot design (prompt v2) on the mock first, then one live seed
# under its own cap; its gate refuses unless results/manifests/pilot.json records a failure.
rule rehearse_repilot_manifest:
    input:
        outcomes=W.gathered(WF.repilot, mock=True),
    output:
        manifest=W.manifest("repilot", mock=True),
    log:
        W.log("rehearse_repilot.log"),
    params:
        design=W.design_file(WF.repilot),
        control=WF.control,
        usd_per_decision=WF.planning_usd_per_decision,
    shell:
        "{MA} pilot {params.design} --mock --outcomes {input.outcomes} --out {output.manifest}"
        " --control {params.control} --usd-per-decision {params.usd_per_decision} > {log} 2>&1"


rule repilot_manifest:
    input:
        outcomes=W.gathered(WF.repilot),
        spent=W.spent(WF.repilot, NO_TIER),
    output:
        manifest=report(W.manifest("repilot"), caption="../workflow/report/pilot.rst",
                        category="Manifests"),
    log:
        W.log("repilot.log"),
    params:
        design=W.design_file(WF.repilot),
        control=WF.control,
        usd_per_decision=WF.planning_usd_per_decision,
    shell:
        "{MA} pilot {params.design} --outcomes {input.outcomes} --out {output.manifest}"
        " --control {params.control} --usd-per-decision {params.usd_per_decision} > {log} 2>&1"
