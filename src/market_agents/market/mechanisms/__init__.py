"""The built-in exchange mechanisms, one module each, registered on import
(:data:`market_agents.plugins.MECHANISMS` imports every module here; the contract is
:mod:`market_agents.market.mechanism`). A mechanism from another package registers through the
``market_agents.mechanisms`` entry-point group instead (docs/extending.md)."""
