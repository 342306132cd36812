"""The ``ma`` subcommands, one module each with ``register(subparsers)``: argument parsing and
one call into the package (``cli.py`` dispatches)."""
