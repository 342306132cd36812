from __future__ import annotations

import pytest

from market_agents.testing.fakeserver import FakeAPI


@pytest.fixture
def fake_api():
    servers = []

    def start(**kw) -> FakeAPI:
        api = FakeAPI(**kw).start()
        servers.append(api)
        return api

    yield start
    for api in servers:
        api.stop()
