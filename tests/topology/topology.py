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
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))   # its modules, however this file is loaded

from live_topology import (Topology, cluster_failover, cluster_masters, cluster_move_slot,  # noqa: E402
                           cluster_slot_owner, from_env_or_start, sentinel_failover, sentinel_master)
from local_processes import POLL, TopologyError, _free_ports, _proc_alive  # noqa: E402,F401
from resp_client import CLUSTER_SLOTS, HOST, Conn, ReplyError, _pairs, call, crc16, key_slot  # noqa: E402,F401
from starters import (ACL_MASTER_NAME, ALL, MASTER_NAME, P12_PASSWORD, SENTINEL_ACL_PASSWORD,  # noqa: E402,F401
                      SENTINEL_ACL_USER, _cluster_check, _replica_link_up)

__all__ = [
    "ALL", "Topology", "TopologyError", "ReplyError", "Conn", "call", "key_slot",
    "from_env_or_start", "sentinel_failover", "sentinel_master", "cluster_move_slot",
    "cluster_failover", "cluster_slot_owner", "cluster_masters",
]


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
