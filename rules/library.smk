# The frozen decision library (protocol §5.4): built from the T1 runs' response cache, replayed
# by cells whose config sets population.llm.frozen_library (no calls). Later live tiers wait for
# it, so the library holds T1's decisions only.


rule library:
    input:
        t1=ancient(W.spent(WF.confirmatory, "T1")),
    output:
        npz=W.library("{library}"),
    log:
        W.log("library", "{library}.log"),
    params:
        cache=W.cache(WF.confirmatory),
        model=W.library_model,
    shell:
        "{MA} library {params.cache} --model {params.model} --out {output.npz} > {log} 2>&1"


rule rehearse_library:
    input:
        t1=W.outcome_files(WF.confirmatory, "T1", mock=True),
    output:
        npz=W.library("{library}", mock=True),
    log:
        W.log("rehearse_library", "{library}.log"),
    params:
        cache=W.cache(WF.confirmatory, mock=True),
        model=W.library_model,
    shell:
        "{MA} library {params.cache} --model {params.model} --out {output.npz} > {log} 2>&1"
