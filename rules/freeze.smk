# Phase 6: the freeze. A deliberate, one-time step after reviewing the pilot: its inputs are
# ancient and its output protected, and `ma freeze` refuses to overwrite an existing freeze.


rule freeze:
    input:
        pilot=ancient(rules.pilot_manifest.output.manifest),
        design=ancient(W.design_file(WF.confirmatory)),
    output:
        freeze=protected(report("results/manifests/freeze.json",
                                caption="../workflow/report/freeze.rst", category="Manifests")),
    log:
        "results/logs/freeze.log",
    shell:
        "{MA} freeze create {input.design} --pilot {input.pilot} --out {output.freeze}"
        " > {log} 2>&1"
