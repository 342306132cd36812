"""The market: the order book and exchange (orders, trades, halts, conservation), the
fundamental value paths and the exchange's rules (circuit breaker, margin calls)."""
