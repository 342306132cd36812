# market_agents: the experiment protocol (WP 27 §2–§6) as one Snakemake workflow.
#   snakemake --cores 8 exploratory      Phase 5a mock design (free)
#   snakemake -n tier_T1                 dry run: live jobs, planned decisions and USD
#   snakemake --cores 8 tier_T1          live tier (budget gate, freeze check, api=1)
# Targets and files: README "Workflow"; rules live in rules/*.smk and call `ma`; what they
# need to know comes from market_agents.pipeline.workflow (rules/common.smk).


configfile: "config/workflow.yaml"


include: "rules/common.smk"


wildcard_constraints:
    kind="|".join(layout.KINDS),
    design=r"[A-Za-z0-9_]+",
    cell=r"[A-Za-z0-9_]+",
    seed=r"[0-9][0-9][0-9][0-9]+",
    tier=TIER_PATTERN,
    bz_tier=r"[a-z_]+",


include: "rules/simulate.smk"
include: "rules/outcomes.smk"
include: "rules/gate.smk"
include: "rules/pilot.smk"
include: "rules/freeze.smk"
include: "rules/sensitivity.smk"
include: "rules/library.smk"
include: "rules/targets.smk"
include: "rules/bazaar.smk"
include: "rules/report.smk"
include: "rules/paper.smk"


rule all:
    default_target: True
    input:
        rules.exploratory.input,
        rules.sigma.input,
        W.sensitivity_file(WF.exploratory),
        rules.bazaar.input,
        rules.dag.output.svg,
