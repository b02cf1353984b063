import pathlib
import sys

import pytest
import redis

sys.path.insert(0, str(pathlib.Path(__file__).parent))

import script  # noqa: E402
from test_model import Server  # noqa: E402


@pytest.fixture(scope="module")
def limit():
    """limit.lua by EVALSHA on a throwaway server of the module's own."""
    server = Server()
    try:
        yield script.Limit(redis.Redis(port=server.port))
    finally:
        server.stop()
