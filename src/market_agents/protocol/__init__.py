"""The experiment protocol: designs as data (``design.py``), planned decisions and USD
(``planning.py``), the tiers and their order of sacrifice (``tiers.py``), the budget gate
(``gate.py``), the freeze (``freeze.py``) and what it can estimate (``estimability.py``: Holm
families, MDEs, estimands that cannot be estimated), the pilot manifest (``pilot.py``), the
guards and spend ledger (``guard.py``, ``ledger.py``), the deviations log (``deviations.py``),
the paper's inputs (``paper.py``), the steps of a
design shared by the CLI and the workflow (``steps.py``) and the design registry the workflow
asks (``registry.py``)."""
