"""The Topology object (what runs: URLs and ports; up, down, load, from the
environment) and the sentinel and cluster operations that change a running one."""
from __future__ import annotations

import concurrent.futures
import json
import os
import shlex
import shutil
import sys
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from local_processes import TopologyError, _down, _Run, _wait
from resp_client import HOST, Conn, ReplyError, call
from starters import ALL, MASTER_NAME, _cluster_view, _parse_only, _sentinel_settled, _start


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
