"""The ``verifiers`` environment id ``bazaar``: ``vf-eval bazaar -a '{"tier": "micro"}' -b URL
-m MODEL``.

verifiers 0.3 finds an environment by importing the module named after its id and calling that
module's ``load_environment``; this module is that entry point and holds nothing else. It needs
the ``bazaar`` extra (``uv sync --extra bazaar``); the environment is
:func:`market_agents.bazaar.verifiers_env.load_environment`.
"""

from market_agents.bazaar.verifiers_env import load_environment

__all__ = ["load_environment"]
