"""The topologies: each starter takes (run, deadline), starts its servers on
free ports and returns its description once they are ready."""
from __future__ import annotations

import os
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterable

from local_processes import (_REDIS_SERVER, TopologyError, _free_ports, _redis_args, _run, _Run, _wait,
                             _wait_serving)
from resp_client import CLUSTER_SLOTS, HOST, Conn, _info, _pairs, call

ALL = ("standalone", "tls", "sentinel", "cluster")
MASTER_NAME = "mymaster"
P12_PASSWORD = "changeit"
# the sentinel that requires a user (RL_TEST_SENTINEL_ACL_URL) and its master's name
SENTINEL_ACL_USER = "watcher"
SENTINEL_ACL_PASSWORD = "T0p.Qw8k"
ACL_MASTER_NAME = "aclmaster"

_REDIS_CLI = os.environ.get("RL_REDIS_CLI") or shutil.which("redis-cli") or "redis-cli"
_OPENSSL = shutil.which("openssl") or "openssl"


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
