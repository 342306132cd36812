"""The experiment protocol: designs as data (``design.py``), planned decisions and USD
(``planning.py``), the tiers and their order of sacrifice (``tiers.py``), the budget gate
(``gate.py``), the freeze (``freeze.py``), the pilot manifest (``pilot.py``), the steps of a
design shared by the CLI and the workflow (``steps.py``) and the design registry the workflow
asks (``registry.py``)."""
