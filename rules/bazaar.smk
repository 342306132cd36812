# Bazaar (the dealer-market environment): scripted anchors, the exploit pass and LLM evaluations
# through the shared LLM layer. Mock evaluations are free; a live provider takes the api resource.
# The provider wildcard is every kind a provider class serves (market_agents.provider_kinds).


rule bazaar_anchors:
    output:
        json=W.bazaar_file("anchors", "anchors.json"),
        parquet=W.bazaar_file("anchors", "anchors.parquet"),
    log:
        W.log("bazaar", "anchors.log"),
    shell:
        "{MA} bazaar anchors --out " + W.bazaar_file("anchors") + " > {log} 2>&1"


rule bazaar_exploits:
    output:
        json=W.bazaar_file("exploits", "exploits_{bz_tier}.json"),
    log:
        W.log("bazaar", "exploits_{bz_tier}.log"),
    shell:
        "{MA} bazaar exploits --tier {wildcards.bz_tier} --out " + W.bazaar_file("exploits")
        + " > {log} 2>&1"


rule bazaar_eval:
    wildcard_constraints:
        provider=W.bazaar_providers,
        model=r"[A-Za-z0-9._-]+",
    output:
        summary=W.bazaar_file("eval", "{provider}", "{model}", "{bz_tier}", "summary.json"),
        scores=W.bazaar_file("eval", "{provider}", "{model}", "{bz_tier}", "scores.parquet"),
    log:
        W.log("bazaar", "eval", "{provider}", "{model}", "{bz_tier}.log"),
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
