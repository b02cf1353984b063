#!/usr/bin/env python3
"""Shared Redis test topologies for the C, Python and Java tests.

Starts throwaway Redis topologies on free 127.0.0.1 ports under one state
directory, waits until each one is fully ready, and describes them with
environment variables, so that CI starts every expensive topology once and all
test suites use it:

    eval $(python3 tests/topology/topology.py up build/topo)
    ctest ...; pytest ...; mvn ...
    python3 tests/topology/topology.py down build/topo

Topologies: ``standalone`` (one plain server), ``tls`` (three TLS servers and a
throwaway CA), ``sentinel`` (master, replica, three sentinels) and ``cluster``
(three masters, three replicas). Python 3.11 standard library only; see
README.md next to this file for the environment variables and the API.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

__all__ = [
    "ALL", "Topology", "TopologyError", "ReplyError", "Conn", "call", "key_slot",
    "from_env_or_start", "sentinel_failover", "sentinel_master", "cluster_move_slot",
    "cluster_failover", "cluster_slot_owner", "cluster_masters",
]

ALL = ("standalone", "tls", "sentinel", "cluster")
HOST = "127.0.0.1"
MASTER_NAME = "mymaster"
CLUSTER_SLOTS = 16384
P12_PASSWORD = "changeit"
# the sentinel that requires a user (RL_TEST_SENTINEL_ACL_URL) and its master's name
SENTINEL_ACL_USER = "watcher"
SENTINEL_ACL_PASSWORD = "T0p.Qw8k"
ACL_MASTER_NAME = "aclmaster"
POLL = 0.02

_REDIS_SERVER = os.environ.get("RL_REDIS_SERVER") or shutil.which("redis-server") or "redis-server"
_REDIS_CLI = os.environ.get("RL_REDIS_CLI") or shutil.which("redis-cli") or "redis-cli"
_OPENSSL = shutil.which("openssl") or "openssl"


class TopologyError(RuntimeError):
    """A topology did not start, or a helper did not reach the state it waits for."""


class ReplyError(Exception):
    """A Redis error reply (``-ERR ...``)."""


# ---------------------------------------------------------------------------
# A minimal RESP2 client (enough for admin commands and the tests)


class Conn:
    """One connection to a Redis node; ``call`` sends a command and returns the reply.

    Bulk strings come back as ``str`` (``decode=True``, undecodable bytes kept
    with surrogateescape) or ``bytes``; error replies raise ReplyError.
    """

    def __init__(self, port: int, host: str = HOST, timeout: float = 2.0,
                 ssl_context: ssl.SSLContext | None = None, server_hostname: str | None = None):
        sock = socket.create_connection((host, port), timeout=timeout)
        try:
            if ssl_context is not None:
                sock = ssl_context.wrap_socket(sock, server_hostname=server_hostname or host)
        except BaseException:
            sock.close()
            raise
        self.sock = sock
        self._rfile = sock.makefile("rb")

    def call(self, *args: Any, decode: bool = True) -> Any:
        self.sock.sendall(_encode(args))
        reply = self._read(decode)
        if isinstance(reply, ReplyError):
            raise reply
        return reply

    def pipeline(self, commands: Iterable[Iterable[Any]], decode: bool = True) -> list[Any]:
        """Sends all commands at once; returns the replies (errors as ReplyError objects)."""
        commands = list(commands)
        self.sock.sendall(b"".join(_encode(c) for c in commands))
        return [self._read(decode) for _ in commands]

    def _read(self, decode: bool) -> Any:
        line = self._rfile.readline()
        if not line.endswith(b"\r\n"):
            raise ConnectionError("connection closed by the server")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return ReplyError(rest.decode(errors="replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self._rfile.read(n + 2)
            if len(data) != n + 2:
                raise ConnectionError("connection closed by the server")
            return data[:-2].decode("utf-8", "surrogateescape") if decode else data[:-2]
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._read(decode) for _ in range(n)]
        raise ConnectionError(f"unexpected reply {line!r}")

    def close(self) -> None:
        try:
            self._rfile.close()
        finally:
            self.sock.close()

    def __enter__(self) -> "Conn":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _encode(args: Iterable[Any]) -> bytes:
    out = []
    args = list(args)
    out.append(b"*%d\r\n" % len(args))
    for a in args:
        if isinstance(a, str):
            a = a.encode("utf-8", "surrogateescape")
        elif isinstance(a, int):
            a = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def call(port: int, *args: Any, decode: bool = True, timeout: float = 2.0, **conn_kw: Any) -> Any:
    """Runs one command on a fresh connection to 127.0.0.1:port."""
    with Conn(port, timeout=timeout, **conn_kw) as c:
        return c.call(*args, decode=decode)


def _info(port: int, section: str) -> dict[str, str]:
    with Conn(port, timeout=1) as c:
        return _info_of(c, section)


def _pairs(flat: list[Any]) -> dict[str, Any]:
    return {flat[i]: flat[i + 1] for i in range(0, len(flat) - 1, 2)}


# ---------------------------------------------------------------------------
# Cluster key slots: CRC16 (XMODEM: poly 0x1021, init 0) of the key or of its hash tag

def _crc16_table() -> list[int]:
    table = []
    for i in range(256):
        crc = i << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
        table.append(crc & 0xFFFF)
    return table


_CRC16 = _crc16_table()


def crc16(data: bytes) -> int:
    crc = 0
    for b in data:
        crc = ((crc << 8) & 0xFFFF) ^ _CRC16[(crc >> 8) ^ b]
    return crc


def key_slot(key: bytes | str) -> int:
    """The Redis Cluster hash slot of a key: only the part between the first
    ``{`` and the next ``}`` counts when that part is not empty."""
    if isinstance(key, str):
        key = key.encode("utf-8", "surrogateescape")
    start = key.find(b"{")
    if start != -1:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            key = key[start + 1:end]
    return crc16(key) & (CLUSTER_SLOTS - 1)


# ---------------------------------------------------------------------------
# Ports and processes

_ports_lock = threading.Lock()
_reserved_ports: set[int] = set()
_children: dict[int, subprocess.Popen] = {}   # processes this interpreter started, to reap them


def _free_ports(n: int, bus: bool = False) -> list[int]:
    """n distinct free loopback ports (with bus=True, port+10000 is free too),
    never handed out twice by this process."""
    ports: list[int] = []
    held: list[socket.socket] = []
    with _ports_lock:
        try:
            for _ in range(1000):
                if len(ports) == n:
                    break
                s = socket.socket()
                held.append(s)
                s.bind((HOST, 0))
                p = s.getsockname()[1]
                if p in _reserved_ports or (bus and (p + 10000 > 65535 or p + 10000 in _reserved_ports)):
                    continue
                if bus:
                    b = socket.socket()
                    held.append(b)
                    try:
                        b.bind((HOST, p + 10000))
                    except OSError:
                        continue
                    _reserved_ports.add(p + 10000)
                _reserved_ports.add(p)
                ports.append(p)
        finally:
            for s in held:
                s.close()
    if len(ports) != n:
        raise TopologyError("could not find free ports")
    return ports


@dataclass
class _Proc:
    topology: str
    name: str
    port: int
    dir: Path
    popen: subprocess.Popen

    @property
    def pid(self) -> int:
        return self.popen.pid

    def log_tail(self, lines: int = 15) -> str:
        chunks = []
        for f in sorted(self.dir.glob("*.log")) + sorted(self.dir.glob("*.out")):
            try:
                text = f.read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                continue
            if text:
                chunks.append(f"--- {f}\n" + "\n".join(text))
        return "\n".join(chunks)


class _Run:
    """The processes of one ``up`` call; keeps DIR/pids current."""

    def __init__(self, root: Path):
        self.root = root
        self.lock = threading.Lock()
        self.procs: list[_Proc] = []

    def spawn(self, topology: str, name: str, port: int, argv: list[str]) -> _Proc:
        d = self.root / topology / name
        d.mkdir(parents=True, exist_ok=True)
        with open(d / f"{name}.out", "ab") as out:
            popen = subprocess.Popen(argv, cwd=d, stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        _children[popen.pid] = popen
        proc = _Proc(topology, name, port, d, popen)
        (d / f"{name}.pid").write_text(f"{popen.pid}\n")
        with self.lock:
            self.procs.append(proc)
            self._write_pids()
        return proc

    def _write_pids(self) -> None:
        tmp = self.root / "pids.tmp"
        tmp.write_text("".join(f"{p.pid}\n" for p in self.procs))
        tmp.replace(self.root / "pids")

    def stop(self, topology: str) -> None:
        """Kills the processes of one topology (before a retry on new ports)."""
        with self.lock:
            victims = [p for p in self.procs if p.topology == topology]
            self.procs = [p for p in self.procs if p.topology != topology]
            self._write_pids()
        _kill([p.pid for p in victims])
        for p in victims:
            shutil.rmtree(p.dir, ignore_errors=True)


def _proc_alive(pid: int) -> bool:
    """True when pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return stat[stat.rfind(b")") + 2:][:1] != b"Z"


def _reap(pid: int) -> None:
    popen = _children.get(pid)
    if popen is not None:
        if popen.poll() is not None:
            del _children[pid]
        return
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _kill(pids: list[int], grace: float = 1.5) -> None:
    """SIGTERM, then SIGKILL after `grace` seconds; returns when all are gone."""
    def alive() -> list[int]:
        for pid in pids:
            _reap(pid)
        return [pid for pid in pids if _proc_alive(pid)]

    for sig, wait in ((signal.SIGCONT, 0), (signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        for pid in alive():
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while alive() and time.monotonic() < deadline:
            time.sleep(POLL)
    left = alive()
    if left:
        raise TopologyError(f"processes {left} did not exit")


def _ours(pid: int, root: Path) -> bool:
    """Guards against pid reuse: a redis process whose working directory is under root."""
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return False
    return comm.startswith("redis") and (cwd == root or root in cwd.parents)


def _down(root: Path) -> list[int]:
    root = Path(root).resolve()
    pids: set[int] = set()
    candidates = [root / "pids"]
    if root.is_dir():
        candidates += [f for f in root.glob("*/*/*.pid")]
    for f in candidates:
        try:
            pids.update(int(tok) for tok in f.read_text().split() if tok.isdigit())
        except OSError:
            pass
    victims = sorted(pid for pid in pids if _proc_alive(pid) and _ours(pid, root))
    _kill(victims)
    for pid in pids:
        _reap(pid)
    for f in candidates:
        f.unlink(missing_ok=True)
    return victims


def _redis_args(proc_dir: Path, name: str, *extra: str) -> list[str]:
    return [_REDIS_SERVER, *extra, "--bind", HOST, "--save", "", "--appendonly", "no",
            "--daemonize", "no", "--dir", str(proc_dir), "--logfile", str(proc_dir / f"{name}.log"),
            "--repl-diskless-sync-delay", "0"]


def _wait(what: str, check, deadline: float, procs: Iterable[_Proc] = (), interval: float = POLL) -> Any:
    """Polls check() until it returns a true value; fails fast when a process dies."""
    procs = list(procs)
    last: Any = None
    while True:
        for p in procs:
            if p.popen.poll() is not None:
                raise TopologyError(f"{p.topology}/{p.name} (port {p.port}) exited with status "
                                    f"{p.popen.returncode} while waiting for {what}\n{p.log_tail()}")
        try:
            result = check()
            if result:
                return result
            last = result
        except (OSError, ReplyError, ValueError, KeyError, IndexError) as e:
            last = e
        if time.monotonic() > deadline:
            tails = "\n".join(p.log_tail() for p in procs)
            raise TopologyError(f"timed out waiting for {what} (last: {last!r})\n{tails}")
        time.sleep(interval)


def _serves(proc: _Proc) -> bool:
    """proc answers PING on its port (and it is proc answering, not a server
    that took the port between picking and binding)."""
    with Conn(proc.port, timeout=0.5) as c:
        return c.call("PING") == "PONG" and int(_info_of(c, "server")["process_id"]) == proc.pid


def _info_of(c: Conn, section: str) -> dict[str, str]:
    text = c.call("INFO", section)
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line and not line.startswith("#"))


def _wait_serving(procs: list[_Proc], deadline: float) -> None:
    for p in procs:
        _wait(f"{p.topology}/{p.name} to serve on {p.port}", lambda: _serves(p), deadline, procs)


def _run(argv: list[str], timeout: float = 30.0, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise TopologyError(f"{shlex.join(argv)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r


# ---------------------------------------------------------------------------
# Topologies. Each starter takes (run, deadline) and returns its description.

def _start_standalone(run: _Run, deadline: float) -> dict[str, Any]:
    (port,) = _free_ports(1)
    d = run.root / "standalone" / "redis"
    proc = run.spawn("standalone", "redis", port, _redis_args(d, "redis", "--port", str(port)))
    _wait_serving([proc], deadline)
    return {"port": port, "url": f"redis://{HOST}:{port}/0"}


_LEAF_EXT = """\
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
"""
_OPENSSL_CNF = """\
[req]
distinguished_name = dn
prompt = no
[dn]
CN = ratelimit-test
[ca_ext]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
""" + "".join(f"[{name}_ext]\n{_LEAF_EXT}extendedKeyUsage = {eku}\n{san}" for name, eku, san in (
    ("server", "serverAuth", "subjectAltName = DNS:localhost, IP:127.0.0.1\n"),
    ("badhost", "serverAuth", "subjectAltName = DNS:wrong.example\n"),
    ("client", "clientAuth", "")))


def _make_certs(tls: Path) -> None:
    """A CA, server/bad-host/client certificates signed by it, and an unrelated CA."""
    tls.mkdir(parents=True, exist_ok=True)
    cnf = tls / "openssl.cnf"
    cnf.write_text(_OPENSSL_CNF)
    days = "3650"
    newkey = ["-newkey", "rsa:2048", "-nodes"]

    def par(cmds: list[list[str]]) -> None:
        procs = [subprocess.Popen(c, cwd=tls, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT) for c in cmds]
        for c, p in zip(cmds, procs):
            out = p.communicate(timeout=60)[0]
            if p.returncode != 0:
                raise TopologyError(f"{shlex.join(c)} failed:\n{out.decode(errors='replace')}")

    leaves = {"server": "localhost", "badhost": "wrong.example", "client": "ratelimit-test-client"}
    par([[_OPENSSL, "req", "-x509", "-new", "-config", str(cnf), "-extensions", "ca_ext", *newkey,
          "-keyout", f"{ca}.key", "-out", f"{ca}.crt", "-days", days, "-subj", f"/CN=ratelimit-test-{ca}"]
         for ca in ("ca", "other-ca")] +
        [[_OPENSSL, "req", "-new", "-config", str(cnf), *newkey, "-keyout", f"{name}.key",
          "-out", f"{name}.csr", "-subj", f"/CN={cn}"] for name, cn in leaves.items()])
    par([[_OPENSSL, "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
          "-set_serial", "0x" + secrets.token_hex(12), "-days", days, "-sha256",
          "-extfile", str(cnf), "-extensions", f"{name}_ext", "-out", f"{name}.crt"] for name in leaves])
    par([[_OPENSSL, "pkcs12", "-export", "-in", "client.crt", "-inkey", "client.key", "-certfile", "ca.crt",
          "-name", "client", "-out", "client.p12", "-passout", f"pass:{P12_PASSWORD}"]])
    for f in tls.glob("*.csr"):
        f.unlink()
    for f in tls.glob("*.key"):
        f.chmod(0o600)


def _tls_cli(tls: Path, port: int, client_cert: bool = False, *args: str) -> list[str]:
    argv = [_REDIS_CLI, "--tls", "--cacert", str(tls / "ca.crt"), "-h", HOST, "-p", str(port)]
    if client_cert:
        argv += ["--cert", str(tls / "client.crt"), "--key", str(tls / "client.key")]
    return argv + list(args)


def _start_tls(run: _Run, deadline: float) -> dict[str, Any]:
    tls = run.root / "tls"
    if not (tls / "client.p12").exists():
        _make_certs(tls)
    pa, pb, pc = _free_ports(3)
    servers = [("a", pa, "server", "no"), ("b", pb, "server", "yes"), ("c", pc, "badhost", "no")]
    procs = []
    for name, port, cert, auth in servers:
        d = run.root / "tls" / name
        procs.append(run.spawn("tls", name, port, _redis_args(
            d, name, "--port", "0", "--tls-port", str(port),
            "--tls-cert-file", str(tls / f"{cert}.crt"), "--tls-key-file", str(tls / f"{cert}.key"),
            "--tls-ca-cert-file", str(tls / "ca.crt"), "--tls-auth-clients", auth)))
    for (name, port, _, auth), proc in zip(servers, procs):
        ping = _tls_cli(tls, port, auth == "yes", "ping")
        info = _tls_cli(tls, port, auth == "yes", "info", "server")
        _wait(f"TLS redis-server {name} on {port}",
              lambda: socket.create_connection((HOST, port), timeout=0.5).close() or True, deadline, [proc])
        _wait(f"redis-cli --tls ping on {port}",
              lambda: _run(ping, timeout=5, check=False).stdout.strip() == "PONG", deadline, [proc])
        if f"process_id:{proc.pid}" not in _run(info, timeout=5, check=False).stdout.split():
            raise TopologyError(f"another process answers on TLS port {port}")
    return {"port": pa, "clientauth_port": pb, "badhost_port": pc, "dir": str(tls),
            "url": f"rediss://{HOST}:{pa}/0?ssl_ca_certs={tls / 'ca.crt'}"}


# what every sentinel here shares
_SENTINEL_HEAD = """\
port {port}
bind 127.0.0.1
daemonize no
dir {dir}
logfile {dir}/{name}.log
"""

_SENTINEL_CONF = _SENTINEL_HEAD + """\
sentinel monitor {master} 127.0.0.1 {mport} 2
sentinel down-after-milliseconds {master} 1000
sentinel failover-timeout {master} 3000
sentinel parallel-syncs {master} 1
"""

_BAD_FLAGS = {"s_down", "o_down", "disconnected", "failover_in_progress", "promoted"}


def _flags_ok(flags: str, role: str) -> bool:
    fl = set(flags.split(","))
    return role in fl and not (fl & _BAD_FLAGS)


def _replica_link_up(port: int, master_port: int) -> bool:
    info = _info(port, "replication")
    return (info.get("role") == "slave" and info.get("master_link_status") == "up"
            and int(info.get("master_port", -1)) == master_port)


def _sentinel_settled(sentinels: list[int], master: int, replica: int, strict: bool = True) -> bool:
    """Every sentinel reports `master`, knows `replica` and the other sentinels;
    the replica's link to the master is up. strict=False skips the sentinels'
    (slowly refreshed) view of the replica's link status."""
    if not _replica_link_up(replica, master):
        return False
    for s in sentinels:
        addr = call(s, "SENTINEL", "get-master-addr-by-name", MASTER_NAME, timeout=1)
        if addr != [HOST, str(master)]:
            return False
        replicas = [_pairs(r) for r in call(s, "SENTINEL", "replicas", MASTER_NAME, timeout=1)]
        if not any(int(r["port"]) == replica and _flags_ok(r["flags"], "slave")
                   and (not strict or r.get("master-link-status") == "ok") for r in replicas):
            return False
        others = {int(x["port"]) for x in map(_pairs, call(s, "SENTINEL", "sentinels", MASTER_NAME, timeout=1))
                  if _flags_ok(x["flags"], "sentinel")}
        if not set(sentinels) - {s} <= others:
            return False
    return True


_ACL_SENTINEL_CONF = _SENTINEL_HEAD + """\
user default off
user {user} on >{password} +@all
sentinel monitor {master} 127.0.0.1 {mport} 1
"""


def _acl_sentinel_answers(port: int, master: int) -> bool:
    with Conn(port, timeout=1) as c:
        c.call("AUTH", SENTINEL_ACL_USER, SENTINEL_ACL_PASSWORD)
        return c.call("SENTINEL", "get-master-addr-by-name", ACL_MASTER_NAME) == [HOST, str(master)]


def _start_acl_sentinel(run: _Run, deadline: float) -> dict[str, Any]:
    """A master of its own (no replica: nothing to fail over) and one sentinel
    that requires a user (its default user is off)."""
    m, sp = _free_ports(2)
    d = run.root / "sentinel" / "acl-master"
    pm = run.spawn("sentinel", "acl-master", m, _redis_args(d, "acl-master", "--port", str(m)))
    _wait_serving([pm], deadline)
    d = run.root / "sentinel" / "acl-sentinel"
    d.mkdir(parents=True, exist_ok=True)
    conf = d / "sentinel.conf"
    conf.write_text(_ACL_SENTINEL_CONF.format(port=sp, dir=d, name="acl-sentinel", user=SENTINEL_ACL_USER,
                                              password=SENTINEL_ACL_PASSWORD, master=ACL_MASTER_NAME, mport=m))
    ps = run.spawn("sentinel", "acl-sentinel", sp, [_REDIS_SERVER, str(conf), "--sentinel"])
    _wait(f"the ACL sentinel on {sp} to name master {m}", lambda: _acl_sentinel_answers(sp, m), deadline, [pm, ps])
    return {"acl_port": sp, "acl_url": f"redis+sentinel://{HOST}:{sp}/{ACL_MASTER_NAME}/0?sentinel_username="
                                       f"{SENTINEL_ACL_USER}&sentinel_password={SENTINEL_ACL_PASSWORD}"}


def _start_sentinel(run: _Run, deadline: float) -> dict[str, Any]:
    acl = _start_acl_sentinel(run, deadline)
    m, r, *sports = _free_ports(5)
    dm, dr = run.root / "sentinel" / "master", run.root / "sentinel" / "replica"
    pm = run.spawn("sentinel", "master", m, _redis_args(dm, "master", "--port", str(m)))
    pr = run.spawn("sentinel", "replica", r, _redis_args(dr, "replica", "--port", str(r),
                                                         "--replicaof", HOST, str(m)))
    _wait_serving([pm, pr], deadline)
    # sentinels discover replicas from the master's INFO: start them once the replica is attached
    _wait(f"replica {r} linked to master {m}", lambda: _replica_link_up(r, m), deadline, [pm, pr])
    procs = [pm, pr]
    for i, sp in enumerate(sports, 1):
        name = f"sentinel{i}"
        d = run.root / "sentinel" / name
        d.mkdir(parents=True, exist_ok=True)
        conf = d / "sentinel.conf"
        conf.write_text(_SENTINEL_CONF.format(port=sp, dir=d, name=name, master=MASTER_NAME, mport=m))
        procs.append(run.spawn("sentinel", name, sp, [_REDIS_SERVER, str(conf), "--sentinel"]))
    _wait_serving(procs, deadline)
    _wait("sentinels to agree on master, replica and each other",
          lambda: _sentinel_settled(sports, m, r), deadline, procs, interval=0.05)
    return {"master_name": MASTER_NAME, "sentinel_ports": sports, "data_ports": [m, r],
            "url": "redis+sentinel://" + ",".join(f"{HOST}:{p}" for p in sports) + f"/{MASTER_NAME}/0", **acl}


def _cluster_nodes(port: int) -> list[dict[str, Any]]:
    nodes = []
    for line in call(port, "CLUSTER", "NODES", timeout=1).splitlines():
        parts = line.split()
        if len(parts) < 8:
            continue
        slots, migrating = [], []
        for tok in parts[8:]:
            if tok.startswith("["):
                migrating.append(tok)
            elif "-" in tok:
                a, b = tok.split("-")
                slots.append((int(a), int(b)))
            else:
                slots.append((int(tok), int(tok)))
        nodes.append({"id": parts[0], "port": int(parts[1].split("@")[0].rsplit(":", 1)[1]),
                      "flags": set(parts[2].split(",")), "master": parts[3], "link": parts[7],
                      "slots": slots, "migrating": migrating})
    return nodes


def _cluster_view(ports: list[int]) -> dict[int, dict[str, Any]] | None:
    """The configuration every node agrees on ({port: {id, role, master (port), slots}}),
    when cluster_state is ok everywhere, every node sees every other as healthy,
    no slot is migrating and every replica's link is up; else None."""
    agreed = None
    for p in ports:
        info = dict(line.split(":", 1) for line in call(p, "CLUSTER", "INFO", timeout=1).splitlines()
                    if ":" in line)
        if (info.get("cluster_state") != "ok" or int(info.get("cluster_known_nodes", 0)) != len(ports)
                or int(info.get("cluster_slots_ok", 0)) != CLUSTER_SLOTS):
            return None
        nodes = _cluster_nodes(p)
        by_id = {n["id"]: n for n in nodes}
        view = {}
        for n in nodes:
            if (n["flags"] & {"fail", "fail?", "handshake", "noaddr"} or n["link"] != "connected"
                    or n["migrating"]):
                return None
            role = "master" if "master" in n["flags"] else "replica"
            master = by_id[n["master"]]["port"] if role == "replica" and n["master"] in by_id else None
            view[n["port"]] = {"id": n["id"], "role": role, "master": master,
                               "slots": sorted(n["slots"])}
        if agreed is None:
            agreed = view
        elif view != agreed:
            return None
    if agreed is None or sorted(agreed) != sorted(ports):
        return None
    for p, n in agreed.items():
        if n["role"] == "replica" and (n["master"] is None or not _replica_link_up(p, n["master"])):
            return None
    return agreed


def _cluster_check(port: int) -> bool:
    r = _run([_REDIS_CLI, "--cluster", "check", f"{HOST}:{port}"], timeout=10, check=False)
    out = r.stdout + r.stderr
    return (r.returncode == 0 and "[OK] All nodes agree about slots configuration." in out
            and f"[OK] All {CLUSTER_SLOTS} slots covered." in out and "[ERR]" not in out)


def _start_cluster(run: _Run, deadline: float) -> dict[str, Any]:
    ports = _free_ports(6, bus=True)
    procs = []
    for i, p in enumerate(ports, 1):
        name = f"node{i}"
        d = run.root / "cluster" / name
        procs.append(run.spawn("cluster", name, p, _redis_args(
            d, name, "--port", str(p), "--cluster-enabled", "yes",
            "--cluster-config-file", str(d / "nodes.conf"), "--cluster-node-timeout", "2000")))
    _wait_serving(procs, deadline)
    _run([_REDIS_CLI, "--cluster", "create", *(f"{HOST}:{p}" for p in ports),
          "--cluster-replicas", "1", "--cluster-yes"], timeout=max(5.0, deadline - time.monotonic()))
    _wait("cluster_state:ok and one configuration on all nodes", lambda: _cluster_view(ports),
          deadline, procs, interval=0.05)
    _wait("redis-cli --cluster check", lambda: _cluster_check(ports[0]), deadline, procs, interval=0.1)
    return {"ports": ports, "url": "redis+cluster://" + ",".join(f"{HOST}:{p}" for p in ports[:3])}


_STARTERS = {"standalone": _start_standalone, "tls": _start_tls,
             "sentinel": _start_sentinel, "cluster": _start_cluster}
_TIMEOUTS = {"standalone": 15.0, "tls": 30.0, "sentinel": 40.0, "cluster": 45.0}


def _start(run: _Run, name: str, attempts: int = 3) -> tuple[dict[str, Any], float]:
    t0 = time.monotonic()
    for attempt in range(1, attempts + 1):
        try:
            return _STARTERS[name](run, time.monotonic() + _TIMEOUTS[name]), time.monotonic() - t0
        except (TopologyError, OSError, subprocess.TimeoutExpired) as e:
            run.stop(name)   # most often a port taken between picking and binding: retry on new ports
            if attempt == attempts:
                raise TopologyError(f"{name}: {e}") from e
            print(f"topology: {name} attempt {attempt} failed, retrying: {str(e).splitlines()[0]}",
                  file=sys.stderr)
    raise AssertionError("unreachable")


def _parse_only(only: str | Iterable[str] | None) -> list[str]:
    if only is None:
        return list(ALL)
    names = [s.strip() for s in (only.split(",") if isinstance(only, str) else only) if s.strip()]
    bad = [s for s in names if s not in ALL]
    if bad or not names:
        raise ValueError(f"unknown topology {bad} (choose from {', '.join(ALL)})")
    return [t for t in ALL if t in names]


# ---------------------------------------------------------------------------
# The public object

@dataclass
class Topology:
    """What is running: URLs and ports of each started topology (None when absent)."""

    dir: Path | None = None
    standalone_url: str | None = None
    standalone_port: int | None = None
    tls_url: str | None = None
    tls_port: int | None = None
    tls_clientauth_port: int | None = None
    tls_badhost_port: int | None = None
    tls_dir: Path | None = None
    sentinel_url: str | None = None
    sentinel_ports: list[int] = field(default_factory=list)
    sentinel_data_ports: list[int] = field(default_factory=list)   # initial [master, replica]
    sentinel_master_name: str = MASTER_NAME
    sentinel_acl_url: str | None = None   # a sentinel whose default user is off
    cluster_url: str | None = None
    cluster_ports: list[int] = field(default_factory=list)
    startup_seconds: dict[str, float] = field(default_factory=dict)
    owned: bool = False   # True when this object started the processes (close() stops them)
    owned_dir: Path | None = None   # where those processes run

    # -- construction ----------------------------------------------------
    @classmethod
    def up(cls, dir: str | os.PathLike, only: str | Iterable[str] | None = None,
           quiet: bool = True) -> "Topology":
        """Starts the topologies (all by default) under dir, waits until they are
        ready and writes dir/env, dir/topology.json and dir/pids. Anything
        already running under dir is stopped first."""
        names = _parse_only(only)
        root = Path(dir).resolve()
        root.mkdir(parents=True, exist_ok=True)
        _down(root)
        for f in ("env", "env.list", "topology.json"):
            (root / f).unlink(missing_ok=True)
        for name in names:
            shutil.rmtree(root / name, ignore_errors=True)
        run = _Run(root)
        state: dict[str, Any] = {"version": 1, "dir": str(root), "topologies": names}
        timings: dict[str, float] = {}
        try:
            with concurrent.futures.ThreadPoolExecutor(len(names)) as pool:
                futures = {name: pool.submit(_start, run, name) for name in names}
                for name, fut in futures.items():
                    state[name], timings[name] = fut.result()
                    if not quiet:
                        print(f"topology: {name} ready in {timings[name]:.2f}s", file=sys.stderr)
        except BaseException:
            _down(root)
            raise
        state["startup_seconds"] = {k: round(v, 3) for k, v in timings.items()}
        state["processes"] = [{"topology": p.topology, "name": p.name, "port": p.port, "pid": p.pid}
                              for p in run.procs]
        topo = cls._from_state(state)
        state["env"] = topo.env()
        (root / "topology.json").write_text(json.dumps(state, indent=2) + "\n")
        (root / "env").write_text(topo.env_lines())
        (root / "env.list").write_text("".join(f"{k}={v}\n" for k, v in state["env"].items()))
        topo.owned, topo.owned_dir = True, root
        return topo

    @staticmethod
    def down(dir: str | os.PathLike) -> list[int]:
        """Stops every process started under dir (safe to call twice); returns the pids it stopped."""
        return _down(Path(dir))

    @classmethod
    def load(cls, dir: str | os.PathLike) -> "Topology":
        """The topology described by dir/topology.json (not owned: close() leaves it running)."""
        return cls._from_state(json.loads((Path(dir) / "topology.json").read_text()))

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> "Topology":
        t = cls(dir=Path(state["dir"]), startup_seconds=dict(state.get("startup_seconds", {})))
        if s := state.get("standalone"):
            t.standalone_url, t.standalone_port = s["url"], s["port"]
        if s := state.get("tls"):
            t.tls_url, t.tls_port, t.tls_dir = s["url"], s["port"], Path(s["dir"])
            t.tls_clientauth_port, t.tls_badhost_port = s["clientauth_port"], s["badhost_port"]
        if s := state.get("sentinel"):
            t.sentinel_url, t.sentinel_master_name = s["url"], s["master_name"]
            t.sentinel_ports, t.sentinel_data_ports = list(s["sentinel_ports"]), list(s["data_ports"])
            t.sentinel_acl_url = s.get("acl_url")
        if s := state.get("cluster"):
            t.cluster_url, t.cluster_ports = s["url"], list(s["ports"])
        return t

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> "Topology":
        """The topology the RL_TEST_* variables describe (absent ones stay None)."""
        env = os.environ if environ is None else environ

        def ports(name: str) -> list[int]:
            return [int(p) for p in env.get(name, "").split(",") if p.strip()]

        def port(name: str) -> int | None:
            return int(env[name]) if env.get(name) else None

        d = env.get("RL_TEST_TOPOLOGY_DIR")
        t = cls(dir=Path(d) if d else None)
        if url := env.get("RL_TEST_REDIS_URL"):
            t.standalone_url, t.standalone_port = url, urllib.parse.urlsplit(url).port or 6379
        if url := env.get("RL_TEST_TLS_URL"):
            t.tls_url = url
            t.tls_port = port("RL_TEST_TLS_PORT") or urllib.parse.urlsplit(url).port
            t.tls_clientauth_port = port("RL_TEST_TLS_CLIENTAUTH_PORT")
            t.tls_badhost_port = port("RL_TEST_TLS_BADHOST_PORT")
            t.tls_dir = Path(env["RL_TEST_TLS_DIR"]) if env.get("RL_TEST_TLS_DIR") else None
        if url := env.get("RL_TEST_SENTINEL_URL"):
            t.sentinel_url = url
            t.sentinel_ports = ports("RL_TEST_SENTINEL_PORTS") or [
                int(hp.rsplit(":", 1)[1]) for hp in urllib.parse.urlsplit(url).netloc.split(",")]
            t.sentinel_data_ports = ports("RL_TEST_SENTINEL_DATA_PORTS")
            parts = urllib.parse.urlsplit(url).path.strip("/").split("/")
            t.sentinel_master_name = parts[0] if parts and parts[0] else MASTER_NAME
            t.sentinel_acl_url = env.get("RL_TEST_SENTINEL_ACL_URL")
        if url := env.get("RL_TEST_CLUSTER_URL"):
            t.cluster_url = url
            t.cluster_ports = ports("RL_TEST_CLUSTER_PORTS") or [
                int(hp.rsplit(":", 1)[1]) for hp in urllib.parse.urlsplit(url).netloc.split(",")]
        return t

    # -- description -----------------------------------------------------
    def available(self) -> list[str]:
        have = {"standalone": self.standalone_url, "tls": self.tls_url,
                "sentinel": self.sentinel_url, "cluster": self.cluster_url}
        return [k for k in ALL if have[k]]

    def env(self) -> dict[str, str]:
        """The RL_TEST_* environment variables of this topology."""
        e: dict[str, str] = {}
        if self.dir is not None:
            e["RL_TEST_TOPOLOGY_DIR"] = str(self.dir)
        if self.standalone_url:
            e["RL_TEST_REDIS_URL"] = self.standalone_url
        if self.tls_url:
            e["RL_TEST_TLS_URL"] = self.tls_url
            e["RL_TEST_TLS_PORT"] = str(self.tls_port)
            e["RL_TEST_TLS_CLIENTAUTH_PORT"] = str(self.tls_clientauth_port)
            e["RL_TEST_TLS_BADHOST_PORT"] = str(self.tls_badhost_port)
            e["RL_TEST_TLS_DIR"] = str(self.tls_dir)
        if self.sentinel_url:
            e["RL_TEST_SENTINEL_URL"] = self.sentinel_url
            e["RL_TEST_SENTINEL_PORTS"] = ",".join(map(str, self.sentinel_ports))
            e["RL_TEST_SENTINEL_DATA_PORTS"] = ",".join(map(str, self.sentinel_data_ports))
            if self.sentinel_acl_url:
                e["RL_TEST_SENTINEL_ACL_URL"] = self.sentinel_acl_url
        if self.cluster_url:
            e["RL_TEST_CLUSTER_URL"] = self.cluster_url
            e["RL_TEST_CLUSTER_PORTS"] = ",".join(map(str, self.cluster_ports))
        return e

    def env_lines(self) -> str:
        return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in self.env().items())

    # -- lifetime --------------------------------------------------------
    def close(self) -> None:
        """Stops the processes if this object started them."""
        if self.owned and self.owned_dir is not None:
            _down(self.owned_dir)
            self.owned = False

    def __enter__(self) -> "Topology":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def from_env_or_start(dir: str | os.PathLike, only: str | Iterable[str] | None = None,
                      environ: dict[str, str] | None = None) -> Topology:
    """The topologies the RL_TEST_* variables describe; those asked for (`only`,
    default all) but not described are started under dir. The result is owned
    (close() stops what was started) when anything was started."""
    topo = Topology.from_env(environ)
    missing = [t for t in _parse_only(only) if t not in topo.available()]
    if not missing:
        return topo
    started = Topology.up(dir, only=missing)
    for f in Topology.__dataclass_fields__:
        if f.split("_")[0] in missing:
            setattr(topo, f, getattr(started, f))
    topo.startup_seconds = started.startup_seconds
    if topo.dir is None:
        topo.dir = started.dir
    topo.owned, topo.owned_dir = True, started.dir
    return topo


def _topology(where: "str | os.PathLike | Topology | None") -> Topology:
    if isinstance(where, Topology):
        return where
    if where is None:
        return Topology.from_env()
    return Topology.load(where)


# ---------------------------------------------------------------------------
# Sentinel helpers

def sentinel_master(where: "str | os.PathLike | Topology | None" = None) -> int:
    """The master port the sentinels agree on (raises when they do not)."""
    topo = _topology(where)
    addrs = {tuple(call(s, "SENTINEL", "get-master-addr-by-name", topo.sentinel_master_name))
             for s in topo.sentinel_ports}
    if len(addrs) != 1:
        raise TopologyError(f"sentinels disagree on the master: {addrs}")
    return int(addrs.pop()[1])


def sentinel_failover(where: "str | os.PathLike | Topology | None" = None,
                      timeout: float = 30.0, reconfigure_old: bool = True) -> tuple[int, int]:
    """SENTINEL FAILOVER, then waits until every sentinel reports the new master,
    it answers ROLE as master and the old master is its replica with the link up.
    Returns (old master port, new master port).

    Sentinel itself turns the old master (still up, still a master) into a
    replica only after it has reported the wrong role for 8 s and been polled
    again (about 10 s); meanwhile it takes writes. reconfigure_old=True sends
    it the REPLICAOF sentinel would send, as soon as the sentinels agree on the
    new master (about 1 s in all); False leaves it to sentinel."""
    topo = _topology(where)
    deadline = time.monotonic() + timeout
    sports, name = topo.sentinel_ports, topo.sentinel_master_name
    data = topo.sentinel_data_ports
    old = _wait("sentinels to agree on the master", lambda: _agreed_master(sports, name), deadline)
    (new,) = [p for p in data if p != old]
    _wait("sentinel to know a good replica", lambda: _sentinel_settled(sports, old, new, strict=False),
          deadline, interval=0.05)

    def start() -> bool:
        try:
            return call(sports[0], "SENTINEL", "FAILOVER", name) == "OK"
        except ReplyError as e:   # -NOGOODSLAVE / -INPROG: sentinel state not refreshed yet
            if "NOGOODSLAVE" in str(e) or "INPROG" in str(e):
                return False
            raise
    _wait("SENTINEL FAILOVER to be accepted", start, deadline, interval=0.1)
    _wait(f"sentinels to report {new} as master",
          lambda: _agreed_master(sports, name) == new and call(new, "ROLE")[0] == "master", deadline)
    if reconfigure_old:
        try:
            if call(old, "ROLE")[0] == "master":
                call(old, "REPLICAOF", HOST, new)
        except (OSError, ReplyError):
            pass
    _wait(f"sentinels to settle with master {new} and replica {old}",
          lambda: _sentinel_settled(sports, new, old, strict=False), deadline, interval=0.05)
    return old, new


def _agreed_master(sentinels: list[int], name: str) -> int | None:
    addrs = {tuple(call(s, "SENTINEL", "get-master-addr-by-name", name, timeout=1)) for s in sentinels}
    return int(addrs.pop()[1]) if len(addrs) == 1 else None


# ---------------------------------------------------------------------------
# Cluster helpers

def _wait_cluster(ports: list[int], deadline: float, what: str = "cluster to settle") -> dict[int, dict[str, Any]]:
    return _wait(what, lambda: _cluster_view(ports), deadline, interval=0.05)


def cluster_masters(where: "str | os.PathLike | Topology | None" = None) -> dict[int, list[tuple[int, int]]]:
    """{master port: [(first slot, last slot), ...]} once the cluster is settled."""
    topo = _topology(where)
    view = _wait_cluster(topo.cluster_ports, time.monotonic() + 30)
    return {p: n["slots"] for p, n in sorted(view.items()) if n["role"] == "master"}


def cluster_slot_owner(where: "str | os.PathLike | Topology | None", slot: int) -> int:
    """The port of the master serving slot."""
    for port, ranges in cluster_masters(where).items():
        if any(a <= slot <= b for a, b in ranges):
            return port
    raise TopologyError(f"slot {slot} is not served")


def cluster_move_slot(where: "str | os.PathLike | Topology | None", slot: int,
                      to_port: int | None = None, timeout: float = 30.0,
                      source_first: bool = False, hold_ms: int = 0) -> tuple[int, int]:
    """Moves one slot and its keys to another master (to_port, default the next
    master by port) with the manual resharding procedure: SETSLOT IMPORTING /
    MIGRATING, GETKEYSINSLOT + MIGRATE ... KEYS until empty, then SETSLOT NODE on
    every master. Safe while clients write to the slot (they get ASK/MOVED).
    source_first tells the source before the destination (older redis-cli
    --cluster, redis-trib): until the destination hears, the two answer each
    other's MOVED; hold_ms keeps that window open. Returns (source port,
    destination port) once every node agrees."""
    topo = _topology(where)
    ports = topo.cluster_ports
    deadline = time.monotonic() + timeout
    view = _wait_cluster(ports, deadline)
    masters = sorted(p for p, n in view.items() if n["role"] == "master")
    (src,) = [p for p in masters if any(a <= slot <= b for a, b in view[p]["slots"])]
    if to_port is None:
        to_port = masters[(masters.index(src) + 1) % len(masters)]
    if to_port not in masters:
        raise TopologyError(f"{to_port} is not a master ({masters})")
    if to_port == src:
        return src, src
    dst = to_port
    src_id, dst_id = view[src]["id"], view[dst]["id"]
    call(dst, "CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
    call(src, "CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)

    def drain() -> None:
        with Conn(src, timeout=10) as c:
            while True:
                keys = c.call("CLUSTER", "GETKEYSINSLOT", slot, 200, decode=False)
                if not keys:
                    return
                c.call("MIGRATE", HOST, dst, "", 0, 5000, "REPLACE", "KEYS", *keys)
                if time.monotonic() > deadline:
                    raise TopologyError(f"slot {slot} did not drain")

    drain()
    if not source_first:
        call(dst, "CLUSTER", "SETSLOT", slot, "NODE", dst_id)
    while True:
        try:
            call(src, "CLUSTER", "SETSLOT", slot, "NODE", dst_id)
            break
        except ReplyError as e:   # a key slipped in before the slot closed: move it too
            if "hold keys" not in str(e) or time.monotonic() > deadline:
                raise
            drain()
    if source_first:
        time.sleep(hold_ms / 1000)   # src says MOVED dst, dst (importing) says MOVED src
        call(dst, "CLUSTER", "SETSLOT", slot, "NODE", dst_id)
    for m in masters:
        if m not in (src, dst):
            call(m, "CLUSTER", "SETSLOT", slot, "NODE", dst_id)
    _wait(f"all nodes to agree that {dst} serves slot {slot}",
          lambda: (v := _cluster_view(ports)) and any(a <= slot <= b for a, b in v[dst]["slots"]),
          deadline, interval=0.05)
    return src, dst


def cluster_failover(where: "str | os.PathLike | Topology | None", master_port: int,
                     timeout: float = 30.0) -> tuple[int, int]:
    """CLUSTER FAILOVER on a replica of master_port; waits until the replica is
    master, the old master its replica (link up) and cluster_state:ok everywhere
    with one configuration. Returns (old master port, new master port)."""
    topo = _topology(where)
    ports = topo.cluster_ports
    deadline = time.monotonic() + timeout
    view = _wait_cluster(ports, deadline)
    if view.get(master_port, {}).get("role") != "master":
        raise TopologyError(f"{master_port} is not a cluster master")
    replicas = sorted(p for p, n in view.items() if n["master"] == master_port)
    if not replicas:
        raise TopologyError(f"master {master_port} has no replica")
    new = replicas[0]
    issued = 0.0

    def done() -> bool:
        nonlocal issued
        if call(new, "ROLE", timeout=1)[0] != "master" and time.monotonic() - issued > 6:
            call(new, "CLUSTER", "FAILOVER", timeout=1)   # a manual failover times out after 5 s
            issued = time.monotonic()
            return False
        v = _cluster_view(ports)
        return bool(v) and v[new]["role"] == "master" and v[master_port]["master"] == new

    _wait(f"replica {new} to take over from {master_port}", done, deadline, interval=0.05)
    return master_port, new


# ---------------------------------------------------------------------------
# CLI

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="topology.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("up", help="start topologies, print the env lines")
    p.add_argument("dir")
    p.add_argument("--only", default=None, help=f"comma-separated subset of {','.join(ALL)}")
    p.add_argument("-q", "--quiet", action="store_true", help="no timings on stderr")
    p = sub.add_parser("down", help="stop every process started under DIR")
    p.add_argument("dir")
    p = sub.add_parser("env", help="print the env lines of a running DIR")
    p.add_argument("dir")
    p = sub.add_parser("run", help="up, run the command after -- with the env, down; exits with its status",
                       usage="topology.py run DIR [--only LIST] -- COMMAND [ARG...]")
    p.add_argument("dir")
    p.add_argument("--only", default=None)
    p = sub.add_parser("sentinel-failover", help="prints: old-master-port new-master-port")
    p.add_argument("dir")
    p = sub.add_parser("cluster-move-slot", help="prints: from-port to-port")
    p.add_argument("dir")
    p.add_argument("slot", type=int)
    p.add_argument("--to", type=int, default=None)
    p.add_argument("--source-first", action="store_true", help="tell the source first (MOVED ping-pong)")
    p.add_argument("--hold-ms", type=int, default=0, help="with --source-first: how long the ping-pong lasts")
    p = sub.add_parser("cluster-failover", help="prints: old-master-port new-master-port")
    p.add_argument("dir")
    p.add_argument("master_port", type=int)
    p = sub.add_parser("key-slot", help="prints the cluster slot of KEY")
    p.add_argument("key")
    argv = sys.argv[1:] if argv is None else list(argv)
    command: list[str] = []
    if argv[:1] == ["run"] and "--" in argv:
        argv, command = argv[:argv.index("--")], argv[argv.index("--") + 1:]
    a = ap.parse_args(argv)
    try:
        if a.cmd == "up":
            t0 = time.monotonic()
            topo = Topology.up(a.dir, only=a.only, quiet=a.quiet)
            if not a.quiet:
                print(f"topology: all ready in {time.monotonic() - t0:.2f}s; "
                      f"stop with: {shlex.join([sys.argv[0], 'down', str(topo.dir)])}", file=sys.stderr)
            sys.stdout.write(topo.env_lines())
        elif a.cmd == "down":
            stopped = Topology.down(a.dir)
            print(f"topology: stopped {len(stopped)} processes", file=sys.stderr)
        elif a.cmd == "env":
            sys.stdout.write(Topology.load(a.dir).env_lines())
        elif a.cmd == "run":
            if not command:
                ap.error("run needs a command after --")
            topo = Topology.up(a.dir, only=a.only, quiet=False)
            try:
                return subprocess.call(command, env={**os.environ, **topo.env()})
            finally:
                Topology.down(a.dir)
        elif a.cmd == "sentinel-failover":
            print(*sentinel_failover(a.dir))
        elif a.cmd == "cluster-move-slot":
            print(*cluster_move_slot(a.dir, a.slot, a.to, source_first=a.source_first, hold_ms=a.hold_ms))
        elif a.cmd == "cluster-failover":
            print(*cluster_failover(a.dir, a.master_port))
        elif a.cmd == "key-slot":
            print(key_slot(os.fsencode(a.key)))
    except (TopologyError, ValueError, FileNotFoundError) as e:
        print(f"topology: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
