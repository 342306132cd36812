"""The built-in exchange mechanisms, one module each, registered on import
(:data:`market_agents.plugins.MECHANISMS` imports every module here; the contract is
:mod:`market_agents.market.mechanism`). A mechanism from another package registers through the
``market_agents.mechanisms`` entry-point group instead (docs/extending.md).

- ``breaker.py``: the circuit breaker (halts on a fast move).
- ``position_limit.py``: position limits (refuses orders beyond them).
- ``leverage.py``: margin calls on leveraged accounts.
- ``call_auction.py``: the periodic call auction (its switch and activity; the matching is the
  exchange's).
- ``transaction_tax.py``: a financial transaction tax on each side of every trade.
"""
