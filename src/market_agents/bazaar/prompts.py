"""The text an agent reads: one system prompt per tier and the per-turn JSON state.

Shared by the LLM evaluation and the ``verifiers`` adapter, so a trained model and an evaluated
model see byte-identical prompts.
"""

from __future__ import annotations

from market_agents.bazaar.tiers import Tier

PROMPT_VERSION = "bazaar-v1"


def prompt_id(tier: Tier) -> str:
    return f"{PROMPT_VERSION}-{tier.name}"


def system_prompt(tier: Tier) -> str:
    lines = [
        "You are a dealer in Bazaar, a one-commodity market. A public index is the commodity's "
        "fair value; it moves randomly each turn and you cannot move it. Scripted counterparties "
        "quote a bid and an ask around the index; sometimes a quote is mispriced.",
        f"The episode has {tier.horizon} turns. You start with {tier.cash:g} cash and "
        f"{tier.start_inventory} units; the index starts at {tier.start_index:g}, moves with "
        f"a standard deviation of about {tier.vol:g} per turn, and the normal quote width is "
        f"{tier.spread:g}.",
        "Your score is your final net worth (cash + units x final index"
        + (" - debt" if tier.has_credit else "")
        + ") divided by your starting net worth. Trading against your own quotes cannot change "
        "the index.",
        "Each turn you get the state as JSON. Reply with exactly one command; you may reason "
        "first, the LAST command in your message is the one played:",
        f"  buy Q   (take the ask, Q units, 1 <= Q <= {tier.max_size})",
        "  sell Q  (hit the bid, Q units; no short selling)",
        "  pass",
    ]
    if tier.is_maker:
        lines += [
            f"  quote BP BQ AP AQ  (post your own bid BP for BQ units and ask AP for AQ units, "
            f"sizes <= {tier.max_size}, BP < AP; it stands until you replace it, pass keeps it)",
            "After you act the index steps; uninformed traders may fill attractive quotes, and "
            "informed traders pick off quotes the index move has made stale. Displayed sizes "
            "on juicy scripted quotes may be larger than what executes.",
        ]
    if tier.has_credit:
        lines += [
            f"Credit: buying beyond your cash draws an automatic loan, up to {tier.loan_ratio:g}x "
            f"your equity, at {tier.interest:.1%} interest per turn; cash repays it each turn. "
            f"If equity falls below {tier.margin_call:.0%} of debt you get a margin call and one "
            "turn to cure it; otherwise you default and score 0.",
        ]
    lines += [
        "An illegal or unreadable command returns 'illegal: <reason>' and you may try once more "
        "that turn; repeating the same illegal message 4 times in a row ends the episode.",
    ]
    return "\n".join(lines)
