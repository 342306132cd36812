"""The market.

- ``types.py``: what traders send (orders, cancels; ``ttl=0`` is immediate-or-cancel) and see.
- ``book.py``: the limit order book, price-time priority in integer ticks.
- ``exchange.py``: the exchange: checks, matching, the call auction, accounts, conservation.
- ``mechanism.py``: the contract of a mechanism, a market rule on the exchange's events
  (an order's admission, each fill, the end of a tick).
- ``mechanisms/``: the package's own mechanisms, one module each (circuit breaker, position
  limits, margin calls, call auction, transaction tax), found by registration.
- ``fundamentals.py``: the value paths V and V^pub, news releases and scheduled shocks.
"""
