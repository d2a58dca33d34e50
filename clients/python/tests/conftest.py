import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from mosaic_test_server import MosaicServer, fresh_principal  # noqa: E402


@pytest.fixture(scope="session")
def server():
    s = MosaicServer()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def principal(server):
    return fresh_principal(server)
