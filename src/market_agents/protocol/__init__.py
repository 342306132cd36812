"""The experiment protocol: designs as data (``design.py``: loading parses and validates, nothing
more; ``comparisons.py``: the paper's comparison tables a design declares), what is computed
from a design (``planning.py``: planned decisions and USD, the budget checks, an equal-USD
cell's cap; ``budget_report.py``: the ``ma budget`` table and the measured tokens per decision),
the tiers and their order of sacrifice (``tiers.py``), the budget gate (``gate.py``), the freeze
file (``freeze.py``), what it records of a design (``facts.py``: the fingerprint, the design
facts) and what the pilot and sigma runs fill in (``measured.py``), what it can estimate
(``estimability.py``: Holm families, MDEs, estimands that cannot be estimated), the pilot
manifest (``pilot.py``), the guards and spend ledger (``guard.py``, ``ledger.py``), the
deviations log (``deviations.py``), the steps of a design shared by the CLI and the workflow
(``steps.py``) and the records of batches of free runs (``batches.py``), the design registry the
workflow asks (``registry.py``), and where each design's runs stand: present, missing, stale,
failed, paid (``status.py``, ``ma status``). The paper of a design is ``market_agents.paper``,
above this folder."""
