"""What a saved run means: the outcome definitions (``outcomes.py``, FROZEN: pure functions of
the saved files), scoring a run directory (``scoring.py``), statistics over a design's
outcomes (``stats.py``: paired differences), the realism report of ``ma validate`` (its
measures in ``realism.py``, its targets in ``stylized.py``, PAMS's CI2002 market beside it in
``pams_ci2002.py``, a script for PAMS's own environment) and figures (``figures.py``)."""
