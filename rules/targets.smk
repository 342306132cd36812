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


# One target per tier of protocol.tiers.TIERS (tier_T1 ...): its runs scored and gathered with
# the control's and, if it is live, its spend reconciled. A new tier is a name in that list.
for tier in TIERS:

    rule:
        name:
            tiers.target(tier)
        input:
            W.tier_target(WF.confirmatory, tier),


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


# The rehearsal of each tier on the mock (rehearse_T1 ...), under results/rehearsal/.
for tier in TIERS:

    rule:
        name:
            tiers.rehearsal_target(tier)
        input:
            W.rehearsal_tier_target(WF.confirmatory, tier),


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
