# Bazaar (the dealer-market environment): scripted anchors, the exploit pass and LLM evaluations
# through the shared LLM layer. Mock evaluations are free; a live provider takes the api resource.


rule bazaar_anchors:
    output:
        json="results/bazaar/anchors/anchors.json",
        parquet="results/bazaar/anchors/anchors.parquet",
    log:
        "results/logs/bazaar/anchors.log",
    shell:
        "{MA} bazaar anchors --out results/bazaar/anchors > {log} 2>&1"


rule bazaar_exploits:
    output:
        json="results/bazaar/exploits/exploits_{bz_tier}.json",
    log:
        "results/logs/bazaar/exploits_{bz_tier}.log",
    shell:
        "{MA} bazaar exploits --tier {wildcards.bz_tier} --out results/bazaar/exploits > {log} 2>&1"


rule bazaar_eval:
    wildcard_constraints:
        provider=r"mock|openai|anthropic|openai_compatible",
        model=r"[A-Za-z0-9._-]+",
    output:
        summary="results/bazaar/eval/{provider}/{model}/{bz_tier}/summary.json",
        scores="results/bazaar/eval/{provider}/{model}/{bz_tier}/scores.parquet",
    log:
        "results/logs/bazaar/eval/{provider}/{model}/{bz_tier}.log",
    params:
        out=W.bazaar_eval_dir,
        cache=W.bazaar_cache,
        usd_cap=W.bazaar_usd_cap,
    resources:
        api=W.bazaar_api,
    shell:
        "{MA} bazaar eval --tier {wildcards.bz_tier} --provider {wildcards.provider}"
        " --model {wildcards.model} --cache {params.cache} {params.usd_cap} --out {params.out}"
        " > {log} 2>&1"


rule bazaar:
    input:
        rules.bazaar_anchors.output,
        expand(rules.bazaar_exploits.output.json, bz_tier=W.bazaar_tiers),
        expand(rules.bazaar_eval.output.summary, provider="mock", model="mock-trader",
               bz_tier=W.bazaar_tiers),
