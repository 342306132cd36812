"""The market.

- ``types.py``: what traders send (orders, cancels; ``ttl=0`` is immediate-or-cancel) and see.
- ``book.py``: the limit order book, price-time priority in integer ticks.
- ``exchange.py``: the exchange: checks, matching, the call auction, accounts, conservation.
- ``rules.py``: the exchange's rules after each tick (circuit breaker, margin calls).
- ``fundamentals.py``: the value paths V and V^pub, news releases and scheduled shocks.
"""
