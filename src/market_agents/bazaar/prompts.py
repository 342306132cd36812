"""The text an agent reads: one system prompt per tier and the per-turn JSON state.

Shared by the LLM evaluation and the ``verifiers`` adapter, so a trained model and an evaluated
model see byte-identical prompts.
"""

from __future__ import annotations

from market_agents.bazaar.tiers import Tier

PROMPT_VERSION = "bazaar-v2"  # v2: the public tiers and mechanics, commands on their own line


def prompt_id(tier: Tier) -> str:
    """The prompt id of ``tier`` (prompt version and tier name): the mock's rule key."""
    return f"{PROMPT_VERSION}-{tier.name}"


def system_prompt(tier: Tier) -> str:
    """The rules of ``tier`` as the agent reads them (every number is the tier's)."""
    lines = [
        "You are a dealer in Bazaar, a one-commodity market. A public index is the commodity's "
        "fair value; it moves randomly each turn and you cannot move it. A scripted "
        "counterparty quotes a bid (it buys from you, up to bid_size units) and an ask (it sells "
        "to you, up to ask_size units) around the index; sometimes a quote is mispriced.",
        f"The episode has {tier.horizon} turns. You start with {tier.cash:g} cash and "
        f"{tier.start_inventory} units; the index starts at {tier.start_index:g} and moves with "
        f"a standard deviation of about {tier.vol:g} per turn; the normal quote width is about "
        f"{tier.spread:g}.",
        "Your score is your final net worth (cash + units x final index"
        + (" - debt" if tier.has_credit else "")
        + ") divided by your starting net worth (starting units marked at the first index). "
        "Trading against your own quotes cannot change the index. The first trade of the "
        "episode earns a small bonus, and well-formed replies earn a small format bonus.",
        "Each turn you get the state as JSON. You may reason first; then write exactly one "
        "command ON A LINE OF ITS OWN, with whole numbers in digits (no commas, units, "
        "percentages or exponents). If several lines hold commands, the last one is played:",
        "  buy Q   (take the ask, Q units, at most the displayed ask_size)",
        "  sell Q  (hit the bid, Q units, at most the displayed bid_size; no short selling)",
        "  pass",
    ]
    if tier.is_maker:
        lines += [
            f"  quote BP BQ AP AQ  (post your own bid BP for BQ units and ask AP for AQ units, "
            f"sizes 1 to {tier.max_size}, prices with at most one decimal point, BP < AP; it "
            "stands until you replace it, and pass keeps it)",
            "After you act the index steps; uninformed traders may trade with your quote, up to "
            "its sizes each turn, and informed traders pick off a side the index move has made "
            "stale. A mispriced scripted quote may execute less than it displays, and an "
            "adversary may post quotes just inside the edges you have been taking.",
        ]
    if tier.has_credit:
        lines += [
            f"Credit: buying beyond your cash draws an automatic loan; total debt may not exceed "
            f"{tier.loan_ratio:g}x your equity (cash + units x index - debt). Cash repays the "
            f"loan at the end of each turn, and debt accrues {tier.interest:.1%} interest per "
            f"turn. If equity falls below {tier.margin_call:.0%} of debt you get a margin call "
            "and one turn to cure it; otherwise you default, the episode ends and you score 0.",
        ]
    lines += [
        "An illegal or unreadable reply returns 'illegal: <reason>'. Your first one in the "
        "episode is free; after that each one loses its turn. Sending the same illegal reply "
        "4 times in a row ends the episode.",
    ]
    return "\n".join(lines)
