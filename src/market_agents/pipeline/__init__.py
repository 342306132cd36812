"""The Snakemake workflow's side of the package: its config and the protocol's defaults
(``workflow_config.py``), everything the rules ask (``workflow.py``), the DAG figure
(``dagrender.py``) and the run contract of ``make run RUN_ID=…`` (``contract.py``)."""
