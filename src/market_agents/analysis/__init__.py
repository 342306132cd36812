"""What a saved run means: the outcome definitions (``outcomes.py``, FROZEN: pure functions of
the saved files), scoring a run directory (``scoring.py``), statistics over a design's
outcomes (``stats.py``: the paired estimator, Holm, MDEs), what the study estimates
(``estimands.py``: the pre-registered contrasts, whether a mechanism acted), the realism
report of ``ma validate`` (its measures in ``realism.py``, its targets in ``stylized.py``,
PAMS's CI2002 market beside it in ``pams_ci2002.py``, a script for PAMS's own environment) and
the figures of one run or one outcome (``figures.py``: ``ma plot``, the realism figures).

The paper's tables and figures are ``market_agents.paper``, which reads this folder; nothing
here imports the protocol or the paper."""
