"""Named random streams from one seed.

Each stream is a ``numpy.random.SeedSequence`` whose spawn key is derived from its name, so a
stream's draws depend only on (seed, name): adding, removing or re-typing one agent never moves
another agent's draws, the fundamental path or the activation schedule.
"""

from __future__ import annotations

import hashlib

import numpy as np

FUNDAMENTALS = "fundamentals"
ACTIVATION = "activation"
SLOTS = "slots"
MOCK_LLM = "mock_llm"


def _key(name: tuple[str | int, ...]) -> tuple[int, ...]:
    digest = hashlib.sha256("/".join(str(p) for p in name).encode()).digest()
    return tuple(int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4))


class Streams:
    """``Streams(seed).generator("agent", 7)`` is slot 7's private generator."""

    def __init__(self, seed: int):
        if not 0 <= int(seed) < 2**32:
            raise ValueError(f"seed {seed} out of range 0..2**32-1")
        self.seed = int(seed)

    def sequence(self, *name: str | int) -> np.random.SeedSequence:
        """The seed sequence of the stream ``name`` (a path of names and numbers)."""
        return np.random.SeedSequence(entropy=self.seed, spawn_key=_key(name))

    def generator(self, *name: str | int) -> np.random.Generator:
        """A PCG64 generator of the stream ``name``: the same seed and name always give the
        same draws.
        """
        return np.random.Generator(np.random.PCG64(self.sequence(*name)))

    def agent(self, slot: int) -> np.random.Generator:
        """Slot ``slot``'s private generator."""
        return self.generator("agent", slot)
