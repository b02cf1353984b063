"""Fixtures: real redis-server processes on free loopback ports (no mocks).

TLS, Sentinel and Cluster come from the RL_TEST_* variables when set (CI
starts them once for every suite), else from tests/topology/topology.py,
started here for the session. Either way the tests fail, not skip, when the
servers cannot be had."""
import importlib.util
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

import ratelimit

REDIS_SERVER = shutil.which("redis-server")
# Under Wine (scripts/windows-test.sh python) a Windows Python can neither
# start nor signal the Linux redis-server: core/tests/redis_ctl.py does it
REDIS_CTL = os.environ.get("RL_TEST_REDIS_CTL")
if REDIS_CTL:
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "core" / "tests"))
    from redis_ctl import ask


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_ctl(*words):
    return ask(REDIS_CTL, *words)


class RedisServer:
    """One throwaway redis-server; stop() kills it, pause()/resume() use
    SIGSTOP/SIGCONT to make it a slow (unresponsive) server."""

    def __init__(self, port=None):
        if not REDIS_SERVER and not REDIS_CTL:
            pytest.fail("redis-server is not installed (apt-get install redis-server): these tests need a real Redis")
        self.port = port or free_port()
        self.dir = tempfile.mkdtemp(prefix="rl-redis-")
        self.proc = self.pid = None
        if REDIS_CTL:
            self.pid = redis_ctl("start", self.port, "-")
        else:
            self.proc = subprocess.Popen(
                [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", self.dir],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.pid = self.proc.pid
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                break
            except OSError:
                if (self.proc and self.proc.poll() is not None) or time.monotonic() > deadline:
                    raise RuntimeError("redis-server did not start")
                time.sleep(0.02)
        self.url = "redis://127.0.0.1:%d/0" % self.port

    def raw(self):
        import redis
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)

    def pause(self):
        if REDIS_CTL:
            redis_ctl("pause", self.pid)
        else:
            os.kill(self.pid, signal.SIGSTOP)

    def resume(self):
        if REDIS_CTL:
            redis_ctl("resume", self.pid)
        else:
            os.kill(self.pid, signal.SIGCONT)

    def stop(self):
        if REDIS_CTL:
            if self.pid is not None:
                redis_ctl("kill", self.pid)
                self.pid = None
        elif self.proc.poll() is None:
            self.resume()
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def server():
    s = RedisServer()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def module_server():
    """A redis-server of the module's own (suites that break or reconfigure it)."""
    s = RedisServer()
    yield s
    s.stop()


@pytest.fixture
def fresh_server():
    """A server of the test's own, for tests that pause or kill it."""
    s = RedisServer()
    yield s
    s.stop()


@pytest.fixture
def start_redis():
    """start_redis(port=None): a RedisServer of the test's own (on that port),
    stopped when the test ends."""
    servers = []

    def start(port=None):
        servers.append(RedisServer(port))
        return servers[-1]
    yield start
    for s in servers:
        s.stop()


@pytest.fixture
def dead_port():
    """A loopback port nothing listens on (until the test starts something there)."""
    return free_port()


@pytest.fixture
def raw(server):
    r = server.raw()
    r.flushall()
    yield r
    r.close()


@pytest.fixture
def client(server, raw):
    c = ratelimit.Client(server.url, timeout=2.0)
    yield c
    c.close()


# ---- TLS, Sentinel, Cluster -------------------------------------------------

REPO = Path(__file__).resolve().parents[3]
TOPOLOGY_PY = REPO / "tests" / "topology" / "topology.py"

# per topology: the variables that describe a running one (all needed), and
# the fixture whose tests use it
TOPOLOGY_VARS = {
    "tls": ("RL_TEST_TLS_URL", "RL_TEST_TLS_DIR", "RL_TEST_TLS_CLIENTAUTH_PORT", "RL_TEST_TLS_BADHOST_PORT"),
    "sentinel": ("RL_TEST_SENTINEL_URL", "RL_TEST_SENTINEL_ACL_URL"),
    "cluster": ("RL_TEST_CLUSTER_URL",),
}
TOPOLOGY_FIXTURES = {"tls": "tls_env", "sentinel": "sentinel_url", "cluster": "cluster_url"}


def _read_env_file(path):
    """NAME=value pairs of the launcher's `export NAME=value` lines."""
    env = {}
    for line in Path(path).read_text().splitlines():
        words = shlex.split(line)
        if len(words) == 2 and words[0] == "export" and "=" in words[1]:
            name, value = words[1].split("=", 1)
            env[name] = value
    return env


def _load_launcher():
    if not TOPOLOGY_PY.exists():
        pytest.fail("%s is missing: cannot start TLS/Sentinel/Cluster servers (or set the RL_TEST_* variables)"
                    % TOPOLOGY_PY)
    spec = importlib.util.spec_from_file_location("rl_topology_launcher", TOPOLOGY_PY)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


class Topologies:
    """The topologies this session's tests need, each described by the
    RL_TEST_* variables or else started (all missing ones at once, in
    parallel) on first use and stopped at the end of the session."""

    def __init__(self, root, wanted):
        self.root = root
        self.wanted = wanted
        self.env = None
        self.started = None
        self.failure = None
        self.lock = threading.Lock()

    def get(self, name):
        with self.lock:
            if self.failure:
                pytest.fail(self.failure)  # once is enough to try
            if self.env is None:
                try:
                    self._start()
                except pytest.fail.Exception as e:
                    self.failure = str(e)
                    raise
        missing = [v for v in TOPOLOGY_VARS[name] if not self.env.get(v)]
        if missing:
            pytest.fail("topology %s: %s not set" % (name, ", ".join(missing)))
        return self.env

    def _start(self):
        env = {k: v for k, v in os.environ.items() if k.startswith("RL_TEST_")}
        partial = [n for n in self.wanted if os.environ.get(TOPOLOGY_VARS[n][0])
                   and not all(os.environ.get(v) for v in TOPOLOGY_VARS[n])]
        if partial:
            pytest.fail("RL_TEST_* variables describe %s only in part: set %s" % (
                ", ".join(partial), ", ".join(v for n in partial for v in TOPOLOGY_VARS[n])))
        start = [n for n in self.wanted if not os.environ.get(TOPOLOGY_VARS[n][0])]
        if start:
            launcher = _load_launcher()
            self.started = self.root / "topology"
            try:
                launcher.Topology.up(self.started, only=",".join(start))
                env.update(_read_env_file(self.started / "env"))
            except Exception as e:  # noqa: BLE001  (any failure to start fails the tests)
                pytest.fail("cannot start the %s topology with %s: %s: %s"
                            % (", ".join(start), TOPOLOGY_PY, type(e).__name__, e))
        self.env = env

    def stop(self):
        if self.started is not None:
            _load_launcher().Topology.down(self.started)


@pytest.fixture(scope="session")
def topologies(request, tmp_path_factory):
    used = set()
    for item in request.session.items:
        used.update(getattr(item, "fixturenames", ()))
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "topology_url" in callspec.params:
            used.add(TOPOLOGY_FIXTURES[callspec.params["topology_url"]])
    wanted = [n for n, fixture in TOPOLOGY_FIXTURES.items() if fixture in used]
    if "tls" in wanted and not ratelimit.has_tls():
        wanted.remove("tls")  # those tests skip: no TLS in this build
    t = Topologies(tmp_path_factory.mktemp("rl-topo"), wanted)
    yield t
    t.stop()


class TlsEnv:
    """The TLS servers: url (rediss://, CA in the query), base_url (no
    query), clientauth_url (needs a client certificate), badhost_url (a
    certificate for another host name) and the PEM files."""

    def __init__(self, env):
        self.url = env["RL_TEST_TLS_URL"]
        self.base_url = self.url.split("?", 1)[0]
        host_port = self.base_url.split("://", 1)[1].split("/", 1)[0]
        self.host = host_port.rsplit(":", 1)[0].rsplit("@", 1)[-1]
        self.clientauth_url = "rediss://%s:%s/0" % (self.host, env["RL_TEST_TLS_CLIENTAUTH_PORT"])
        self.badhost_url = "rediss://%s:%s/0" % (self.host, env["RL_TEST_TLS_BADHOST_PORT"])
        d = Path(env["RL_TEST_TLS_DIR"])
        self.ca, self.other_ca = d / "ca.crt", d / "other-ca.crt"
        self.client_cert, self.client_key = d / "client.crt", d / "client.key"
        for f in (self.ca, self.other_ca, self.client_cert, self.client_key):
            if not f.exists():
                pytest.fail("RL_TEST_TLS_DIR has no %s" % f.name)


@pytest.fixture(scope="session")
def tls_env(topologies):
    if not ratelimit.has_tls():
        pytest.skip("this build of ratelimit has no TLS (built against hiredis without hiredis_ssl): "
                    "rebuild with hiredis >= 1.0 and OpenSSL (scripts/hiredis.sh) to test rediss://")
    return TlsEnv(topologies.get("tls"))


@pytest.fixture(scope="session")
def sentinel_url(topologies):
    return topologies.get("sentinel")["RL_TEST_SENTINEL_URL"]


@pytest.fixture(scope="session")
def sentinel_acl_url(sentinel_url, topologies):
    """A sentinel whose default user is off: the URL has sentinel_username and sentinel_password."""
    return topologies.get("sentinel")["RL_TEST_SENTINEL_ACL_URL"]


@pytest.fixture(scope="session")
def cluster_url(topologies):
    return topologies.get("cluster")["RL_TEST_CLUSTER_URL"]


@pytest.fixture(scope="session", params=["sentinel", "cluster"])
def topology_url(request):
    """The URL of a Sentinel, then of a Cluster deployment."""
    return request.getfixturevalue(TOPOLOGY_FIXTURES[request.param])
