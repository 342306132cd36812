"""The ``verifiers`` adapter: ``load_environment(tier=..., num_train_examples=...,
num_eval_examples=...)`` returns a ``vf.MultiTurnEnv`` over the Bazaar engine.

Needs the optional ``bazaar`` extra (``make setup`` installs it, with ``dev``;
``verifiers>=0.3.0,<0.4``, since 0.4 removed ``MultiTurnEnv``). The engine never imports
this module. Live play steps a
:class:`BazaarEnv` kept in the rollout state, but the reward does not trust it: it replays the
assistant messages of the finished transcript through a fresh engine, so the reward is a pure
function of (tier, seed, messages), whatever happened during the rollout.

A rollout whose model call failed (verifiers sets ``state["error"]``: no server, a refused
request) is errored, never a string of passes: reward, score and format bonus 0, and the
``bazaar_errored`` metric 1, so ``vf-eval`` reports it apart.
"""

from __future__ import annotations

import copy
from typing import Any

from market_agents.bazaar.engine import BazaarEnv
from market_agents.bazaar.play import max_messages, replay
from market_agents.bazaar.prompts import system_prompt
from market_agents.bazaar.tiers import Tier, eval_seeds, get_tier, train_seeds


def _content(message: Any) -> tuple[str | None, str]:
    role = message.get("role") if isinstance(message, dict) else getattr(message, "role", None)
    content = (message.get("content") if isinstance(message, dict)
               else getattr(message, "content", None))
    if isinstance(content, list):  # content parts
        content = "".join(
            (p.get("text", "") if isinstance(p, dict) else getattr(p, "text", "") or "")
            for p in content
        )
    return role, content or ""


def assistant_messages(completion: Any) -> list[str]:
    """The assistant's texts of a verifiers completion (a string, or chat messages)."""
    if isinstance(completion, str):
        return [completion]
    return [text for role, text in map(_content, completion or []) if role == "assistant"]


def replay_completion(tier: str, seed: int, completion: Any) -> dict:
    """Score a verifiers completion by replaying its assistant messages through a fresh
    engine (the rollout's state is not trusted).
    """
    return replay(tier, seed, assistant_messages(completion))


def rollout_scores(info: dict, completion: Any, state: Any = None) -> dict[str, float]:
    """The rubric's values for one finished rollout: ``reward``, ``score`` and
    ``format_bonus`` from a replay of its assistant messages, and ``errored`` (0 or 1).

    Args:
        info: the row's info (``tier``, ``seed``).
        completion: the rollout's completion (chat messages or a string).
        state: the rollout state; one carrying an ``error`` (a model call that failed) is
            errored: every value 0 but ``errored``, since the turns it never played are no
            passes (replaying them as passes scored a dead server 1.2, format bonus in full).

    Returns:
        ``{"reward", "score", "format_bonus", "errored"}`` as floats.
    """
    if state is not None and state.get("error") is not None:
        return {"reward": 0.0, "score": 0.0, "format_bonus": 0.0, "errored": 1.0}
    rep = replay_completion(info["tier"], int(info["seed"]), completion)
    return {"reward": float(rep["reward"]), "score": float(rep["score"]),
            "format_bonus": float(rep["format_bonus"]), "errored": 0.0}


def drop_null_fields(native: list[Any]) -> list[Any]:
    """Chat messages as sent, without the keys whose value is null (``tool_calls: null``).

    verifiers writes every assistant turn back with ``tool_calls`` (and
    ``reasoning_content``) set to null when there are none; llama-cpp-python's server types
    ``tool_calls`` as a list and answers a null with HTTP 500, so a rollout died after its
    first turn. An absent key means the same to every server. ``content`` is kept even when
    null (an assistant message that only calls tools).

    Args:
        native: the client's native messages (dicts; anything else passes unchanged).

    Returns:
        The messages, each dict without its null keys but ``content``.
    """
    return [{k: v for k, v in m.items() if v is not None or k == "content"}
            if isinstance(m, dict) else m for m in native]


def _without_null_fields(client: Any) -> Any:
    """A shallow copy of a verifiers client whose native prompt has no null keys
    (:func:`drop_null_fields`); a client without ``to_native_prompt`` is returned as it is.
    The copy shares the original's HTTP client; the original is left untouched."""
    original = getattr(client, "to_native_prompt", None)
    if original is None:
        return client

    async def to_native_prompt(messages):
        native, extra = await original(messages)
        return drop_null_fields(native), extra

    wrapped = copy.copy(client)
    wrapped.to_native_prompt = to_native_prompt  # the instance's, which get_response calls
    return wrapped


def _rows(tier: Tier, seeds: list[int]) -> list[dict]:
    rows = []
    for s in seeds:
        env = BazaarEnv(tier)
        rows.append({"question": env.reset(s), "answer": "",
                     "info": {"tier": tier.name, "seed": s}})
    return rows


def load_environment(tier: str = "micro", num_train_examples: int = 1000,
                     num_eval_examples: int = 20, **kwargs):
    """Train rows use seeds 0.., eval rows the frozen split from 1,000,000."""
    # why: verifiers and datasets are the optional `bazaar` extra
    import verifiers as vf
    from datasets import Dataset

    t = get_tier(tier)

    class BazaarMultiTurnEnv(vf.MultiTurnEnv):
        async def setup_state(self, state, **kw):
            info = state["info"]
            env = BazaarEnv(get_tier(info["tier"]))
            env.reset(int(info["seed"]))
            state["bazaar"] = env
            return state

        async def env_response(self, messages, state, **kw):
            env: BazaarEnv = state["bazaar"]
            _, text = _content(messages[-1])
            obs, _, done, _ = env.step(text)
            response = [vf.UserMessage(content=obs)]
            if done:
                state["final_env_response"] = response
            return response

        async def get_model_response(self, state, prompt, client=None, **kw):
            client = client if client is not None else state["client"]
            return await super().get_model_response(
                state, prompt, client=_without_null_fields(client), **kw)

        @vf.cleanup
        async def drop_engine(self, state):
            state.pop("bazaar", None)

    # the rubric passes the rollout state to functions that take **kw: an errored rollout
    # (state["error"]) scores 0 whatever its partial transcript says
    def bazaar_reward(completion, info, state=None, **kw) -> float:
        return rollout_scores(info, completion, state)["reward"]

    def bazaar_score(completion, info, state=None, **kw) -> float:
        return rollout_scores(info, completion, state)["score"]

    def format_bonus(completion, info, state=None, **kw) -> float:
        return rollout_scores(info, completion, state)["format_bonus"]

    def bazaar_errored(completion, info, state=None, **kw) -> float:
        return rollout_scores(info, completion, state)["errored"]

    rubric = vf.Rubric(funcs=[bazaar_reward, bazaar_score, format_bonus, bazaar_errored],
                       weights=[1.0, 0.0, 0.0, 0.0])
    train = Dataset.from_list(_rows(t, train_seeds(num_train_examples))) \
        if num_train_examples > 0 else None
    evalset = Dataset.from_list(_rows(t, eval_seeds(num_eval_examples))) \
        if num_eval_examples > 0 else None
    return BazaarMultiTurnEnv(
        dataset=train,
        eval_dataset=evalset,
        system_prompt=system_prompt(t),
        rubric=rubric,
        max_turns=max_messages(t) + 1,  # the engine ends the episode, not this bound
        env_id="bazaar",  # the module vf-eval and its env servers import (src/bazaar)
        env_args={"tier": t.name},
        **kwargs,
    )
