"""Named errors. Each message names the file, key or argument at fault."""


class MarketAgentsError(Exception):
    """Base class: the CLI turns these into one line on stderr and exit code 2."""


class ConfigError(MarketAgentsError):
    """A config file, override or design is invalid."""


class OrderRejected(MarketAgentsError):
    """An order broke an exchange rule (funds, position limit, halt)."""


class BudgetExceeded(MarketAgentsError):
    """A call would take spend past a USD cap."""


class RunFailed(MarketAgentsError):
    """A run stopped because too many of its LLM calls failed; ``record`` says why (the
    runner writes it beside the run directory). Raised by the LLM traders' pool; declared here
    so the runner catches it without loading the LLM layer."""

    def __init__(self, message: str, record: dict):
        super().__init__(message)
        self.record = record


class Terminated(KeyboardInterrupt):
    """SIGTERM (a SLURM time limit or preemption, systemd stopping a unit, ``kill``) raised in
    the main thread of an ``ma`` command. A ``KeyboardInterrupt``, so it takes Ctrl-C's path
    everywhere: no new call starts, calls in flight finish within the stop grace and are
    stored, claims are released; ``ma`` exits 143 (128 + 15) instead of 130."""
