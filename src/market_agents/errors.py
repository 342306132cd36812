"""Named errors. Each message names the file, key or argument at fault."""


class MarketAgentsError(Exception):
    """Base class: the CLI turns these into one line on stderr and exit code 2."""


class ConfigError(MarketAgentsError):
    """A config file, override or design is invalid."""


class OrderRejected(MarketAgentsError):
    """An order broke an exchange rule (funds, position limit, halt)."""


class BudgetExceeded(MarketAgentsError):
    """A call would take spend past a USD cap."""
