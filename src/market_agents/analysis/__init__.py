"""What a saved run means: the outcome definitions (``outcomes.py``, FROZEN: pure functions of
the saved files), scoring a run directory (``scoring.py``), statistics over a design's
outcomes (``stats.py``: paired differences), the stylized facts (``stylized.py``) and figures
(``figures.py``)."""
