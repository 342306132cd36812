# The DAG figure for the protocol appendix (SVG + Mermaid), and a clear error for unknown targets.


rule dag:
    output:
        dot="results/dag/protocol.dot",
        svg=report("results/dag/protocol.svg", caption="../workflow/report/dag.rst",
                   category="Workflow"),
        mermaid="results/dag/protocol.mmd",
    log:
        "results/logs/dag.log",
    params:
        snakefile=workflow.main_snakefile,
        snakemake=W.snakemake,
    shell:
        "{params.snakemake} -s {params.snakefile} --nolock protocol --quiet all --rulegraph dot"
        " > {output.dot} 2> {log}"
        " && {MA} dag {output.dot} --svg {output.svg} --mermaid {output.mermaid} >> {log} 2>&1"


rule unknown_target:
    input:
        W.unknown_target,
    output:
        "{name}",
    wildcard_constraints:
        name=r"[^/.]+",
    shell:
        "false"
