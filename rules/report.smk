# The DAG figure for the protocol appendix (SVG + Mermaid), and a clear error for unknown targets.


# Drawn in protocol order: the rule graph of the targets up to the freeze, then that of the
# confirmatory ones (its rules labelled "(confirmatory)"), the freeze before their gates.
rule dag:
    output:
        before=W.dag_file("freeze.dot"),
        after=W.dag_file("confirmatory.dot"),
        dot=W.dag_file("protocol.dot"),
        svg=report(W.dag_file("protocol.svg"), caption="../workflow/report/dag.rst",
                   category="Workflow"),
        mermaid=W.dag_file("protocol.mmd"),
    log:
        W.log("dag.log"),
    params:
        snakefile=workflow.main_snakefile,
        snakemake=W.snakemake,
        before=W.dag_before_freeze,
        after=W.dag_after_freeze,
    shell:
        "{params.snakemake} -s {params.snakefile} --nolock {params.before} --quiet all"
        " --rulegraph dot > {output.before} 2> {log}"
        " && {params.snakemake} -s {params.snakefile} --nolock {params.after} --quiet all"
        " --rulegraph dot > {output.after} 2>> {log}"
        " && {MA} dag {output.before} {output.after} --dot {output.dot} --svg {output.svg}"
        " --mermaid {output.mermaid} >> {log} 2>&1"


rule unknown_target:
    input:
        W.unknown_target,
    output:
        "{name}",
    wildcard_constraints:
        name=r"[^/.]+",
    shell:
        "false"
