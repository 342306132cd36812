"""The Snakemake workflow's side of the package: its config and the protocol's defaults
(``workflow_config.py``), everything the rules ask (``workflow.py``), the DAG figure
(``dagrender.py``), the run contract of ``make run RUN_ID=…`` (``contract.py``: its declared
runs in ``record.py``, its evaluation in ``evaluation.py``, the provenance of its results in
``provenance.py``), one live invocation per project directory, a killed one's lock released
by the next (``holder.py``), and settling a paid job that will not be resumed, once no process
or workflow holds it (``settle.py``, ``ma spend settle``)."""
