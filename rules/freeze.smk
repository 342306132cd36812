# Phase 6: the freeze. A deliberate, one-time step after reviewing the pilot: its inputs are
# ancient and its output protected, and `ma freeze` refuses to overwrite an existing freeze.


rule freeze:
    input:
        pilot=ancient(rules.pilot_manifest.output.manifest),
        design=ancient(W.design_file(WF.confirmatory)),
        sigma=ancient(W.gathered(WF.sigma)),
    output:
        freeze=protected(report(W.manifest("freeze"), caption="../workflow/report/freeze.rst",
                                category="Manifests")),
    log:
        W.log("freeze.log"),
    params:
        sigma=W.design_file(WF.sigma),
    shell:
        "{MA} freeze create {input.design} --pilot {input.pilot} --sigma {params.sigma}"
        " --out {output.freeze} > {log} 2>&1"


# The rehearsal's freeze, from the rehearsed pilot: what rehearsed equal-USD cells read.
rule rehearse_freeze:
    input:
        pilot=W.manifest("pilot", mock=True),
        design=W.design_file(WF.confirmatory),
        sigma=W.gathered(WF.sigma, mock=True),
    output:
        freeze=W.manifest("freeze", mock=True),
    log:
        W.log("rehearse_freeze.log"),
    params:
        sigma=W.design_file(WF.sigma),
    shell:
        "{MA} freeze create {input.design} --mock --pilot {input.pilot} --sigma {params.sigma}"
        " --out {output.freeze} > {log} 2>&1"
