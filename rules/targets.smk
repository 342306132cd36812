# The protocol's targets. Tiers run in order: the gate of a tier waits for the reconciled spend
# of the earlier live tiers. `rehearse_*` run the same cells on the mock (same model ids and
# price table) under results/rehearsal/.


rule exploratory:
    input:
        W.gathered(WF.exploratory),


rule sigma:
    input:
        W.gathered(WF.sigma),
        W.control_sd_file(WF.sigma),


rule pilot:
    input:
        rules.pilot_manifest.output.manifest,


rule tier_T1:
    input:
        W.tier_target(WF.confirmatory, "T1"),


rule tier_T2:
    input:
        W.tier_target(WF.confirmatory, "T2"),


rule tier_T3:
    input:
        W.tier_target(WF.confirmatory, "T3"),


rule tier_T4:
    input:
        W.tier_target(WF.confirmatory, "T4"),


rule tier_T5:
    input:
        W.tier_target(WF.confirmatory, "T5"),


rule tier_T6:
    input:
        W.tier_target(WF.confirmatory, "T6"),


rule confirmatory:
    input:
        W.gathered(WF.confirmatory),
        W.all_spent(WF.confirmatory),


rule sensitivity:
    input:
        W.sensitivity_file(WF.confirmatory),


rule rehearse_pilot:
    input:
        W.gathered(WF.pilot, mock=True),
        rules.rehearse_pilot_manifest.output.manifest,


# The failure path (§4), once a failed pilot is recorded: mock re-run, then the live re-pilot.
rule repilot:
    input:
        rules.repilot_manifest.output.manifest,


rule rehearse_repilot:
    input:
        rules.rehearse_repilot_manifest.output.manifest,


rule rehearse_T1:
    input:
        W.rehearsal_tier_target(WF.confirmatory, "T1"),


rule rehearse_T2:
    input:
        W.rehearsal_tier_target(WF.confirmatory, "T2"),


rule rehearse_T3:
    input:
        W.rehearsal_tier_target(WF.confirmatory, "T3"),


rule rehearse_T4:
    input:
        W.rehearsal_tier_target(WF.confirmatory, "T4"),


rule rehearse_T5:
    input:
        W.rehearsal_tier_target(WF.confirmatory, "T5"),


rule rehearse_T6:
    input:
        W.rehearsal_tier_target(WF.confirmatory, "T6"),


rule rehearse_confirmatory:
    input:
        W.gathered(WF.confirmatory, mock=True),


# Everything the protocol produces, in order; `make dag` draws this target's rule graph.
rule protocol:
    input:
        rules.exploratory.input,
        rules.sigma.input,
        rules.pilot.input,
        rules.freeze.output.freeze,
        rules.confirmatory.input,
        rules.sensitivity.input,
