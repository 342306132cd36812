"""The engine stands alone: no training framework, no market engine, no LLM layer."""

import subprocess
import sys


def test_engine_imports_neither_verifiers_nor_the_market():
    code = (
        "import sys; import market_agents.bazaar.engine, market_agents.bazaar.policies, "
        "market_agents.bazaar.anchors, market_agents.bazaar.exploits; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('verifiers', 'datasets') "
        "or m.startswith(('market_agents.market', 'market_agents.agents', 'market_agents.llm'))]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
