"""A throwaway redis-server on a free loopback port for the cross-component tests."""
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def redis_port():
    port = _free_port()
    # under Wine (scripts/windows-test.sh python) core/tests/redis_ctl.py starts it
    ctl = os.environ.get("RL_TEST_REDIS_CTL")
    if ctl:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "core" / "tests"))
        from redis_ctl import ask
        pid = ask(ctl, "start", port, "-")
    else:
        proc = subprocess.Popen([shutil.which("redis-server"), "--port", str(port), "--bind", "127.0.0.1",
                                 "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL)
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            break
        except OSError:
            time.sleep(0.01)
    yield port
    if ctl:
        ask(ctl, "stop", pid)
    else:
        proc.terminate()
        proc.wait()
