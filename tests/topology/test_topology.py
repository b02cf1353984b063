"""Brings every topology up with the CLI in a temporary directory, checks what
each environment variable points at and the failover / resharding helpers,
then takes it down and checks that no process is left."""
import os
import re
import shlex
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path
from types import SimpleNamespace

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import starters  # noqa: E402  (the starters look _free_ports up in their own module)
import topology as T  # noqa: E402

CLI = [sys.executable, str(HERE / "topology.py")]
EXPECTED_VARS = {
    "RL_TEST_TOPOLOGY_DIR", "RL_TEST_REDIS_URL",
    "RL_TEST_TLS_URL", "RL_TEST_TLS_PORT", "RL_TEST_TLS_CLIENTAUTH_PORT", "RL_TEST_TLS_BADHOST_PORT",
    "RL_TEST_TLS_DIR",
    "RL_TEST_SENTINEL_URL", "RL_TEST_SENTINEL_PORTS", "RL_TEST_SENTINEL_DATA_PORTS", "RL_TEST_SENTINEL_ACL_URL",
    "RL_TEST_CLUSTER_URL", "RL_TEST_CLUSTER_PORTS",
}


def running(pids):
    """The pids among `pids` that pgrep still finds as live redis processes (zombies excluded:
    where PID 1 does not reap orphans, a stopped server lingers as <defunct>)."""
    out = subprocess.run(["pgrep", "redis"], capture_output=True, text=True).stdout.split()
    return sorted(pid for pid in map(int, out) if pid in set(pids) and T._proc_alive(pid))


def read_pids(d):
    return [int(x) for x in (Path(d) / "pids").read_text().split()]


def cli(*args, timeout=120):
    r = subprocess.run(CLI + [str(a) for a in args], capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{args}: {r.stdout}{r.stderr}"
    return r.stdout


@pytest.fixture(scope="module")
def topo(tmp_path_factory):
    d = tmp_path_factory.mktemp("topo")
    t0 = time.monotonic()
    out = cli("up", d)
    elapsed = time.monotonic() - t0
    env = {}
    for line in out.splitlines():
        name, value = line.removeprefix("export ").split("=", 1)
        env[name] = shlex.split(value)[0]
    pids = read_pids(d)
    print(f"\nup took {elapsed:.2f}s: {T.Topology.load(d).startup_seconds}")
    yield SimpleNamespace(dir=d.resolve(), env=env, stdout=out, pids=pids, elapsed=elapsed)
    cli("down", d)
    assert running(pids) == []
    cli("down", d)   # twice is fine


def tls_context(tls_dir, cafile="ca.crt", client_cert=False, check_hostname=True):
    ctx = ssl.create_default_context(cafile=str(Path(tls_dir) / cafile))
    ctx.verify_flags |= ssl.VERIFY_X509_STRICT   # the default from Python 3.13
    ctx.check_hostname = check_hostname
    if client_cert:
        ctx.load_cert_chain(str(Path(tls_dir) / "client.crt"), str(Path(tls_dir) / "client.key"))
    return ctx


def tls_ping(port, ctx, server_hostname="127.0.0.1"):
    return T.call(port, "PING", ssl_context=ctx, server_hostname=server_hostname)


# ---------------------------------------------------------------------------- CLI and env


def test_up_prints_and_writes_env(topo):
    assert set(topo.env) == EXPECTED_VARS
    assert all(re.fullmatch(r"export RL_TEST_[A-Z_]+=\S+", line) for line in topo.stdout.splitlines())
    assert (topo.dir / "env").read_text() == topo.stdout
    assert T.Topology.load(topo.dir).env() == topo.env
    assert Path(topo.env["RL_TEST_TOPOLOGY_DIR"]) == topo.dir
    assert cli("env", topo.dir) == topo.stdout
    # eval $(...) unquoted, as the README says, and source
    for how in ('eval $(cat "$1/env")', '. "$1/env"'):
        r = subprocess.run(["bash", "-c", how + '; redis-cli -u "$RL_TEST_REDIS_URL" ping; echo "$RL_TEST_TLS_URL"',
                            "x", str(topo.dir)], capture_output=True, text=True, env={"PATH": os.environ["PATH"]})
        assert r.stdout.split() == ["PONG", topo.env["RL_TEST_TLS_URL"]], r.stderr


def test_processes_outlive_the_cli(topo):
    assert len(topo.pids) == 1 + 3 + 5 + 2 + 6   # the sentinel topology: 5, and the ACL sentinel with its master
    assert running(topo.pids) == sorted(topo.pids)


def test_startup_is_fast(topo):
    # target < 15 s on a 2-core machine; allow slack for a loaded CI box
    assert topo.elapsed < 45, topo.elapsed


def test_from_env_starts_nothing(topo, tmp_path):
    t = T.from_env_or_start(tmp_path / "unused", environ=topo.env)
    assert not t.owned and not (tmp_path / "unused").exists()
    assert t.env() == topo.env
    t.close()
    assert running(topo.pids) == sorted(topo.pids)


# ---------------------------------------------------------------------------- standalone


def test_standalone(topo):
    url = topo.env["RL_TEST_REDIS_URL"]
    assert re.fullmatch(r"redis://127\.0\.0\.1:\d+/0", url)
    r = subprocess.run(["redis-cli", "-u", url, "ping"], capture_output=True, text=True)
    assert r.stdout.strip() == "PONG"


# ---------------------------------------------------------------------------- TLS


def test_tls_url_and_files(topo):
    u = urllib.parse.urlsplit(topo.env["RL_TEST_TLS_URL"])
    assert (u.scheme, u.hostname, u.port, u.path) == ("rediss", "127.0.0.1", int(topo.env["RL_TEST_TLS_PORT"]), "/0")
    tls = Path(topo.env["RL_TEST_TLS_DIR"])
    assert urllib.parse.parse_qs(u.query) == {"ssl_ca_certs": [str(tls / "ca.crt")]}
    for f in ("ca.crt", "client.crt", "client.key", "other-ca.crt", "client.p12"):
        assert (tls / f).is_file(), f
    subprocess.run(["openssl", "pkcs12", "-in", str(tls / "client.p12"), "-passin", "pass:" + T.P12_PASSWORD,
                    "-noout"], check=True)


def test_tls_server_verifies_by_ip_and_name(topo):
    port, tls = int(topo.env["RL_TEST_TLS_PORT"]), topo.env["RL_TEST_TLS_DIR"]
    r = subprocess.run(["redis-cli", "--tls", "--cacert", f"{tls}/ca.crt", "-p", str(port), "ping"],
                       capture_output=True, text=True)
    assert r.stdout.strip() == "PONG"
    assert tls_ping(port, tls_context(tls)) == "PONG"
    assert tls_ping(port, tls_context(tls), "localhost") == "PONG"


def test_tls_wrong_ca_is_rejected(topo):
    port, tls = int(topo.env["RL_TEST_TLS_PORT"]), topo.env["RL_TEST_TLS_DIR"]
    with pytest.raises(ssl.SSLCertVerificationError):
        tls_ping(port, tls_context(tls, cafile="other-ca.crt"))


def test_tls_client_auth(topo):
    port, tls = int(topo.env["RL_TEST_TLS_CLIENTAUTH_PORT"]), topo.env["RL_TEST_TLS_DIR"]
    base = ["redis-cli", "--tls", "--cacert", f"{tls}/ca.crt", "-p", str(port)]
    with_cert = subprocess.run(base + ["--cert", f"{tls}/client.crt", "--key", f"{tls}/client.key", "ping"],
                               capture_output=True, text=True)
    assert with_cert.stdout.strip() == "PONG"
    without = subprocess.run(base + ["ping"], capture_output=True, text=True)
    assert "PONG" not in without.stdout
    assert tls_ping(port, tls_context(tls, client_cert=True)) == "PONG"
    with pytest.raises(OSError):
        tls_ping(port, tls_context(tls))
    # server A does not ask for one
    assert tls_ping(int(topo.env["RL_TEST_TLS_PORT"]), tls_context(tls, client_cert=True)) == "PONG"


def test_tls_hostname_mismatch(topo):
    port, tls = int(topo.env["RL_TEST_TLS_BADHOST_PORT"]), topo.env["RL_TEST_TLS_DIR"]
    for name in ("127.0.0.1", "localhost"):
        with pytest.raises(ssl.SSLCertVerificationError, match="mismatch"):
            tls_ping(port, tls_context(tls), name)
    # the chain itself is fine: same CA, only the name is wrong
    assert tls_ping(port, tls_context(tls), "wrong.example") == "PONG"
    assert tls_ping(port, tls_context(tls, check_hostname=False)) == "PONG"


# ---------------------------------------------------------------------------- sentinel


def test_sentinel_env(topo):
    sports = [int(p) for p in topo.env["RL_TEST_SENTINEL_PORTS"].split(",")]
    master, replica = [int(p) for p in topo.env["RL_TEST_SENTINEL_DATA_PORTS"].split(",")]
    assert topo.env["RL_TEST_SENTINEL_URL"] == (
        "redis+sentinel://" + ",".join(f"127.0.0.1:{p}" for p in sports) + "/mymaster/0")
    assert len(set(sports + [master, replica])) == 5
    for s in sports:
        assert T.call(s, "SENTINEL", "get-master-addr-by-name", "mymaster") == ["127.0.0.1", str(master)]
        assert len(T.call(s, "SENTINEL", "sentinels", "mymaster")) == 2
        assert [T._pairs(r)["port"] for r in T.call(s, "SENTINEL", "replicas", "mymaster")] == [str(replica)]
    assert T.call(master, "ROLE")[0] == "master"
    assert T._replica_link_up(replica, master)
    assert T.sentinel_master(topo.dir) == master


def check_sentinel_master(sports, master, replica):
    for s in sports:
        assert T.call(s, "SENTINEL", "get-master-addr-by-name", "mymaster") == ["127.0.0.1", str(master)]
    role = T.call(replica, "ROLE")
    assert T.call(master, "ROLE")[0] == "master"
    assert role[:3] == ["slave", "127.0.0.1", master] and role[3] == "connected"
    key = f"failover-check-{time.monotonic_ns()}"
    with T.Conn(master) as c:   # WAIT counts acks of this connection's writes
        assert c.call("SET", key, "1") == "OK"
        assert c.call("WAIT", 1, 5000) == 1
    assert T.call(replica, "GET", key) == "1"
    with pytest.raises(T.ReplyError, match="READONLY"):
        T.call(replica, "SET", key, "2")


def test_sentinel_failover_and_back(topo):
    sports = [int(p) for p in topo.env["RL_TEST_SENTINEL_PORTS"].split(",")]
    master, replica = [int(p) for p in topo.env["RL_TEST_SENTINEL_DATA_PORTS"].split(",")]
    t0 = time.monotonic()
    assert T.sentinel_failover(topo.dir) == (master, replica)
    first = time.monotonic() - t0
    check_sentinel_master(sports, replica, master)
    t0 = time.monotonic()
    assert cli("sentinel-failover", topo.dir).split() == [str(replica), str(master)]
    print(f"\nsentinel failovers took {first:.2f}s and {time.monotonic() - t0:.2f}s")
    check_sentinel_master(sports, master, replica)


def test_sentinel_failover_left_to_sentinel(topo):
    """Without the REPLICAOF nudge sentinel itself demotes the old master (about 10 s)."""
    sports = [int(p) for p in topo.env["RL_TEST_SENTINEL_PORTS"].split(",")]
    master = T.sentinel_master(topo.dir)
    (replica,) = {int(p) for p in topo.env["RL_TEST_SENTINEL_DATA_PORTS"].split(",")} - {master}
    t0 = time.monotonic()
    assert T.sentinel_failover(topo.dir, reconfigure_old=False) == (master, replica)
    print(f"\nsentinel failover without the nudge took {time.monotonic() - t0:.2f}s")
    check_sentinel_master(sports, replica, master)
    assert T.sentinel_failover(topo.dir) == (replica, master)
    check_sentinel_master(sports, master, replica)


# ---------------------------------------------------------------------------- cluster


def cluster_ports(topo):
    return [int(p) for p in topo.env["RL_TEST_CLUSTER_PORTS"].split(",")]


def slots_tables(ports):
    """CLUSTER SLOTS of every node, normalized: {(first, last): master port}."""
    return [{(a, b): m[1] for a, b, m, *_ in T.call(p, "CLUSTER", "SLOTS")} for p in ports]


def check_cluster_consistent(ports):
    for p in ports:
        info = T.call(p, "CLUSTER", "INFO")
        assert "cluster_state:ok" in info and "cluster_slots_ok:16384" in info, (p, info)
    tables = slots_tables(ports)
    assert all(t == tables[0] for t in tables)
    assert sum(b - a + 1 for a, b in tables[0]) == 16384
    assert T._cluster_check(ports[0])


def test_cluster_env_and_state(topo):
    ports = cluster_ports(topo)
    assert len(set(ports)) == 6
    assert topo.env["RL_TEST_CLUSTER_URL"] == "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in ports[:3])
    check_cluster_consistent(ports)
    masters = T.cluster_masters(topo.dir)
    assert len(masters) == 3
    for p in ports:
        role = T.call(p, "ROLE")[0]
        assert role == ("master" if p in masters else "slave")


KEYS = [b"", b"foo", b"123456789", b"{user1000}.following", b"{user1000}.followers", b"foo{}{bar}",
        b"foo{{bar}}zap", b"foo{bar}{zap}", b"{}", b"}{", b"{a", b"a{b}c", b"\xff\x00{\x01}", b"rl:{sms:user-42}:gcra",
        "ключ".encode()]


def test_key_slot_matches_cluster_keyslot(topo):
    assert T.key_slot(b"123456789") == 0x31C3   # the CRC16-XMODEM check value
    assert T.key_slot(b"{user1000}.following") == T.key_slot(b"{user1000}.followers")
    port = cluster_ports(topo)[0]
    for key in KEYS:
        assert T.key_slot(key) == T.call(port, "CLUSTER", "KEYSLOT", key), key
    assert cli("key-slot", "{user1000}.following").strip() == str(T.key_slot(b"user1000"))


class MiniClusterClient:
    """Routes single-key commands, following MOVED and ASK like a cluster client."""

    def __init__(self, seed):
        self.seed, self.owner, self.conns = seed, {}, {}
        self.moved = self.asked = 0

    def conn(self, port):
        if port not in self.conns:
            self.conns[port] = T.Conn(port, timeout=5)
        return self.conns[port]

    def call(self, key, *args):
        slot = T.key_slot(key)
        port, asking = self.owner.get(slot, self.seed), False
        for _ in range(50):
            c = self.conn(port)
            replies = c.pipeline([["ASKING"], args] if asking else [args])
            reply = replies[-1]
            if not isinstance(reply, T.ReplyError):
                return reply
            kind, _, addr = str(reply).split(" ")[:3] if " " in str(reply) else (str(reply), 0, "")
            if kind == "MOVED":
                port, asking = int(addr.rsplit(":", 1)[1]), False
                self.owner[slot] = port
                self.moved += 1
            elif kind == "ASK":
                port, asking = int(addr.rsplit(":", 1)[1]), True
                self.asked += 1
            elif kind == "TRYAGAIN":
                time.sleep(0.01)
            else:
                raise reply
        raise AssertionError(f"too many redirections for {key!r}")

    def close(self):
        for c in self.conns.values():
            c.close()


def test_cluster_move_slot_while_writing(topo):
    ports = cluster_ports(topo)
    tag = "rl-move"
    slot = T.key_slot(tag.encode())
    src = T.cluster_slot_owner(topo.dir, slot)
    # keys that exist before the move
    with T.Conn(src) as c:
        replies = c.pipeline([["SET", f"{{{tag}}}:pre:{i}", i] for i in range(3000)])
        assert all(r == "OK" for r in replies)

    counts, errors, stop, ops = {}, [], threading.Event(), [0]
    client = MiniClusterClient(ports[0])

    def writer():
        try:
            n = 0
            while not stop.is_set():
                key = f"{{{tag}}}:w:{n // 3}"   # a new key every third write
                assert client.call(key.encode(), "INCR", key) == counts.get(key, 0) + 1
                counts[key] = counts.get(key, 0) + 1
                n += 1
                ops[0] = n
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    def wait_ops(k):
        target = ops[0] + k
        deadline = time.monotonic() + 20
        while ops[0] < target and not errors and time.monotonic() < deadline:
            time.sleep(0.005)

    th = threading.Thread(target=writer)
    th.start()
    try:
        wait_ops(200)
        t0 = time.monotonic()
        src_, dst = T.cluster_move_slot(topo.dir, slot)
        took = time.monotonic() - t0
        assert src_ == src and dst != src
        assert T.cluster_slot_owner(topo.dir, slot) == dst
        wait_ops(200)
        # and back again, named explicitly, through the CLI
        assert cli("cluster-move-slot", topo.dir, slot, "--to", src).split() == [str(dst), str(src)]
        wait_ops(200)
    finally:
        stop.set()
        th.join()
        client.close()
    assert not errors, errors
    print(f"\nmoved slot {slot} ({3000 + len(counts)} keys) in {took:.2f}s; "
          f"{ops[0]} writes, {client.moved} MOVED, {client.asked} ASK")
    assert client.moved >= 2
    assert T.call(src, "CLUSTER", "COUNTKEYSINSLOT", slot) == 3000 + len(counts)
    assert T.call(dst, "CLUSTER", "COUNTKEYSINSLOT", slot) == 0
    with T.Conn(src) as c:
        assert c.pipeline([["GET", k] for k in counts]) == [str(v) for v in counts.values()]
        assert c.pipeline([["GET", f"{{{tag}}}:pre:{i}"] for i in range(0, 3000, 7)]) == [
            str(i) for i in range(0, 3000, 7)]
    check_cluster_consistent(ports)


def test_cluster_failover_and_back(topo):
    ports = cluster_ports(topo)
    masters = T.cluster_masters(topo.dir)
    master = sorted(masters)[0]
    t0 = time.monotonic()
    old, new = T.cluster_failover(topo.dir, master)
    took = time.monotonic() - t0
    assert old == master and new not in masters
    assert T.call(new, "ROLE")[0] == "master"
    assert T.call(old, "ROLE")[:3] == ["slave", "127.0.0.1", new]
    assert T.cluster_masters(topo.dir)[new] == masters[master]
    check_cluster_consistent(ports)
    key = next(f"k{i}" for i in range(10**6) if any(a <= T.key_slot(f"k{i}") <= b for a, b in masters[master]))
    assert T.call(new, "SET", key, "v") == "OK"
    with pytest.raises(T.ReplyError, match="MOVED"):
        T.call(old, "GET", key)
    t0 = time.monotonic()
    assert cli("cluster-failover", topo.dir, new).split() == [str(new), str(old)]
    print(f"\ncluster failovers took {took:.2f}s and {time.monotonic() - t0:.2f}s")
    assert sorted(T.cluster_masters(topo.dir)) == sorted(masters)
    check_cluster_consistent(ports)


# ---------------------------------------------------------------------------- API, other CLI commands


def test_api_up_down(tmp_path):
    with T.Topology.up(tmp_path / "t", only=["standalone"]) as t:
        assert t.owned and t.available() == ["standalone"]
        assert set(t.env()) == {"RL_TEST_TOPOLOGY_DIR", "RL_TEST_REDIS_URL"}
        assert T.call(t.standalone_port, "PING") == "PONG"
        pids = read_pids(tmp_path / "t")
        assert len(pids) == 1 and running(pids) == pids
    assert running(pids) == []
    assert T.Topology.down(tmp_path / "t") == []


def test_from_env_or_start_starts_what_is_missing(tmp_path):
    given = T.from_env_or_start(tmp_path / "u", only="standalone", environ={"RL_TEST_REDIS_URL": "redis://h:1/0"})
    assert not given.owned and given.standalone_port == 1 and not (tmp_path / "u").exists()
    t = T.from_env_or_start(tmp_path / "t", only="standalone", environ={})
    try:
        assert t.owned and t.standalone_url and not t.cluster_url
        assert T.call(t.standalone_port, "PING") == "PONG"
        pids = read_pids(tmp_path / "t")
    finally:
        t.close()
    assert running(pids) == []


def test_up_again_replaces_and_down_is_idempotent(tmp_path):
    d = tmp_path / "t"
    cli("up", d, "--only", "standalone")
    first = read_pids(d)
    cli("up", d, "--only", "standalone")
    second = read_pids(d)
    assert running(first) == [] and running(second) == second
    cli("down", d)
    cli("down", d)
    assert running(second) == []


def test_run_command(tmp_path):
    d = tmp_path / "t"
    out = cli("run", d, "--only", "standalone", "--", "sh", "-c",
              'redis-cli -u "$RL_TEST_REDIS_URL" ping; cat "$RL_TEST_TOPOLOGY_DIR/pids"')
    pong, pid = out.split()
    assert pong == "PONG" and running([int(pid)]) == []


def test_retries_on_a_taken_port(tmp_path, monkeypatch):
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    taken = squatter.getsockname()[1]
    real, calls = T._free_ports, []

    def free_ports(n, bus=False):
        calls.append(n)
        return [taken] if len(calls) == 1 else real(n, bus)

    monkeypatch.setattr(starters, "_free_ports", free_ports)
    try:
        with T.Topology.up(tmp_path / "t", only="standalone") as t:
            assert len(calls) == 2 and t.standalone_port != taken
            assert T.call(t.standalone_port, "PING") == "PONG"
    finally:
        squatter.close()


def test_bad_only_fails():
    r = subprocess.run(CLI + ["up", "/nonexistent/x", "--only", "mongo"], capture_output=True, text=True)
    assert r.returncode != 0 and "unknown topology" in r.stderr
