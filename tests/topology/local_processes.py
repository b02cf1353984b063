"""Local redis-server processes: free ports, starting them under the state
directory (where ``down`` finds them again), waiting for them and stopping them."""
from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from resp_client import HOST, Conn, ReplyError, _info_of

POLL = 0.02
_REDIS_SERVER = os.environ.get("RL_REDIS_SERVER") or shutil.which("redis-server") or "redis-server"


class TopologyError(RuntimeError):
    """A topology did not start, or a helper did not reach the state it waits for."""


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


def _wait_serving(procs: list[_Proc], deadline: float) -> None:
    for p in procs:
        _wait(f"{p.topology}/{p.name} to serve on {p.port}", lambda: _serves(p), deadline, procs)


def _run(argv: list[str], timeout: float = 30.0, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise TopologyError(f"{shlex.join(argv)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r
