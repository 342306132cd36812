"""One run of the market: the tick loop (``simulation.py``), the atomic runner that writes a
run directory (``runner.py``), the run-directory format: file names, table schemas, reading
(``rundir.py``), and the code fingerprint every manifest records, a hash of the source that
decides a run's tables (``fingerprint.py``). Imports the market, the agents and the config;
never the protocol, the workflow or the analysis."""
