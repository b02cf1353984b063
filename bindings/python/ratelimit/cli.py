"""The ratelimit command line tool: look at and manage limiters in Redis.

    ratelimit [--url URL] [--prefix P] [--json] COMMAND ...

It speaks the clients' URLs (one server, TLS, Sentinel, Cluster) and reads
the keys as the library names them (docs/semantics.md):
``<prefix>:{<name>:<id>}:<algorithm>[:<n>]`` for an entity's state and
``<prefix>:config:<name>`` for a stored spec.
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import os
import sys
import threading
import time
from typing import Any, Dict, Iterator, List, NoReturn, Optional, Tuple

import ratelimit

EXIT_OK = 0
EXIT_NOT_FOUND = 1  # nothing stored / no such config / denied
EXIT_USAGE = 2      # bad command line or argument
EXIT_REDIS = 3      # Redis unreachable or failing

EPILOG = """\
exit codes:
  0  done
  1  not found: no spec stored (config get / delete), a spec already stored
     (config set --if-absent), no limiter matches (ls), the peek is denied (show),
     no state and no spec (show), state of another algorithm than asked (show, reset)
  2  usage: a bad command line, rate, algorithm or other argument
  3  Redis: unreachable, timed out, or answered an error

environment:
  REDIS_URL  the default for --url (else redis://127.0.0.1:6379/0)
"""

ALGORITHMS = set(ratelimit.ALGORITHMS)


class Failure(Exception):
    """A one-line error and the exit code it means."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, no usage dump
        raise Failure("%s (see %s --help)" % (message, self.prog), EXIT_USAGE)


# ---- keys ---------------------------------------------------------------------------


def parse_key(key: str, prefix: str) -> Optional[Dict[str, Any]]:
    """What a key of the library holds, as the core reads it back:
    {"kind": "config", "name"} or {"kind": "state", "name", "id", "client",
    "algorithm", "rate"} or {"kind": <primitive>, "name"}; None for a key of
    someone else's."""
    parts = ratelimit._ratelimit._parse_key(key, prefix)
    if parts is None:
        return None
    kind, name, ident, owner, algorithm, rate, suffix = parts
    if kind == "state":
        return {"kind": kind, "name": name, "id": ident, "client": owner, "algorithm": algorithm, "rate": rate}
    return {"kind": suffix.split(":")[0] if kind == "other" else kind, "name": name}


def scan(client: ratelimit.Client, match: str) -> Iterator[str]:
    """Every key matching match, on every master (SCAN, never KEYS)."""
    for node in client._masters():
        cursor = b"0"
        while True:
            cursor, keys = client._command(["SCAN", cursor, "MATCH", match, "COUNT", 1000], node=node)
            for k in keys:
                yield k.decode("utf-8", "surrogateescape")
            if cursor in (b"0", 0, "0"):
                break


def _escape_glob(text: str) -> str:
    return "".join("[%s]" % c if c in "*?[]\\" else c for c in text)


def _ttl(ms: int) -> str:
    if ms == -1:
        return "none"
    if ms < 0:
        return "gone"
    return "%.3fs" % (ms / 1000)


def _seconds(value: Optional[float]) -> str:
    return "-" if value is None else "%.3fs" % value


# ---- output ---------------------------------------------------------------------------


def _emit(args: argparse.Namespace, data: Any, lines: List[str]) -> None:
    if args.json:
        print(json.dumps(data, sort_keys=True))
    else:
        for line in lines:
            print(line)


def _table(rows: List[List[str]]) -> List[str]:
    if not rows:
        return []
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def _config_data(config: ratelimit.LimiterConfig) -> Dict[str, Any]:
    return {"algorithm": config.algorithm, "rates": [list(r) for r in config.rates], "bursts": list(config.bursts),
            "initial_tokens": config.initial_tokens, "per_client": config.per_client, "text": str(config)}


def _result_data(r: ratelimit.Result) -> Dict[str, Any]:
    return {"allowed": r.allowed, "limit": r.limit, "remaining": r.remaining, "retry_after": r.retry_after,
            "reset_after": r.reset_after, "rate_index": r.rate_index}


# ---- commands -------------------------------------------------------------------------


def cmd_ls(client: ratelimit.Client, args: argparse.Namespace) -> int:
    prefix = client.prefix
    entries = []
    for key in scan(client, _escape_glob(prefix) + ":*"):
        info = parse_key(key, prefix)
        if info is None or not fnmatch.fnmatchcase(info["name"], args.pattern):
            continue
        if info["kind"] != "state" and info["kind"] != "config" and not args.all:
            continue
        info["key"] = key
        info["pttl"] = client._command(["PTTL", key], key=key)
        entries.append(info)
    entries.sort(key=lambda e: (e["name"], e["kind"] != "config", str(e.get("id")), e.get("rate", 0)))
    rows = [["NAME", "ID", "ALGORITHM", "TTL", "KEY"]]
    for e in entries:
        if e["kind"] == "config":
            config = client.get_config(e["name"])
            e["spec"] = str(config) if config else None
            rows.append([e["name"], "(config)", e["spec"] or "?", _ttl(e["pttl"]), e["key"]])
        elif e["kind"] == "state":
            ident = e["id"] + ("  [client %s]" % e["client"] if e["client"] else "")
            alg = e["algorithm"] + (" rate %d" % e["rate"] if e["rate"] > 1 else "")
            rows.append([e["name"], ident, alg, _ttl(e["pttl"]), e["key"]])
        else:
            rows.append([e["name"], "", e["kind"], _ttl(e["pttl"]), e["key"]])
    _emit(args, entries, _table(rows) if entries else ["no limiter matches %r" % args.pattern])
    return EXIT_OK if entries else EXIT_NOT_FOUND


def _spec_args(p: argparse.ArgumentParser, required: bool = False) -> None:
    p.add_argument("--rate", required=required,
                   help="the limiter's rate(s), e.g. 10/second or '10/second;1000/hour' (default: the stored spec; "
                   "without one, show and reset work from the entity's keys)")
    p.add_argument("--algorithm", help="fixed_window, sliding_log, sliding_window, token_bucket, leaky_bucket, "
                   "gcra (default: the algorithm of the entity's state, else gcra)")
    p.add_argument("--burst", type=int, action="append", help="burst (repeat: one per rate)")
    p.add_argument("--initial-tokens", type=int, help="permits a new entity starts with (default: full)")
    p.add_argument("--per-client", action="store_true", help="a quota per client (see --client-id)")


def _state_keys(client: ratelimit.Client, args: argparse.Namespace,
                stored: Optional[ratelimit.LimiterConfig]) -> Dict[str, List[str]]:
    """The entity's state keys that exist, by algorithm, in rate order: the
    core names every key the entity can have, so nothing is scanned."""
    per_client = stored.per_client if stored is not None else args.per_client
    candidates = {alg: [client._key(args.name, args.id, alg, rate, per_client)
                        for rate in range(ratelimit._ratelimit.MAX_RATES)] for alg in ratelimit.ALGORITHMS}
    first = candidates["gcra"][0]  # every key of the entity has its hash tag
    found = {}
    for alg, keys in candidates.items():
        if client._command(["EXISTS"] + keys, key=first):  # one round trip per algorithm without state
            found[alg] = [k for k in keys if client._command(["EXISTS", k], key=k)]
    return found


def _limiter(client: ratelimit.Client, args: argparse.Namespace,
             found: Dict[str, List[str]], stored: Optional[ratelimit.LimiterConfig]) -> Optional[ratelimit.Limiter]:
    """The limiter the command line or the stored spec describes; None when
    there is neither (show and reset then work from the keys alone). Without
    --algorithm, the algorithm of the entity's state."""
    if args.rate is None:
        if args.burst or args.initial_tokens is not None:
            raise Failure("--burst and --initial-tokens need --rate", EXIT_USAGE)
        if stored is None:
            return None
        if args.algorithm or args.per_client:
            raise Failure("a spec is stored for limiter %r (%s): --algorithm and --per-client need --rate"
                          % (args.name, stored), EXIT_USAGE)
        lim = client.limiter(args.name)
    else:
        algorithm = args.algorithm
        if algorithm is None and len(found) > 1:
            raise Failure("%s / %s has state of %s: give --algorithm" % (args.name, args.id, ", ".join(sorted(found))),
                          EXIT_USAGE)
        if algorithm is None and found:
            algorithm = next(iter(found))
        # a spec stored for the name must agree (else InvalidArgument naming both)
        lim = client.limiter(args.name, args.rate, algorithm=algorithm, burst=_burst(args),
                             initial_tokens=args.initial_tokens, per_client=args.per_client)
    _check_algorithm(args, found, lim.config.algorithm)
    return lim


def _check_algorithm(args: argparse.Namespace, found: Dict[str, List[str]], algorithm: Optional[str]) -> None:
    """A reset or show of one algorithm's state while the entity has only
    another's would say "nothing there" and leave the state: refuse it."""
    if algorithm is not None and found and algorithm not in found:
        raise Failure("%s / %s has no %s state, but %s: give --algorithm %s" % (
            args.name, args.id, algorithm, " and ".join(sorted(found)), sorted(found)[0]), EXIT_NOT_FOUND)


def _burst(args: argparse.Namespace) -> Any:
    """--burst once: the first rate's; repeated: one per rate."""
    return args.burst[0] if args.burst and len(args.burst) == 1 else args.burst


def _raw(client: ratelimit.Client, key: str) -> Dict[str, Any]:
    kind = client._command(["TYPE", key], key=key)
    out: Dict[str, Any] = {"key": key, "type": kind, "pttl": client._command(["PTTL", key], key=key)}
    if kind == "hash":
        flat = client._command(["HGETALL", key], key=key)
        out["fields"] = {flat[i].decode(): flat[i + 1].decode("utf-8", "replace") for i in range(0, len(flat), 2)}
    elif kind == "string":
        out["value"] = client._command(["GET", key], key=key).decode("utf-8", "replace")
    elif kind == "zset":
        out["members"] = client._command(["ZCARD", key], key=key)
        flat = client._command(["ZRANGE", key, 0, 4, "WITHSCORES"], key=key)
        out["first"] = [[flat[i].decode("utf-8", "replace"), float(flat[i + 1])] for i in range(0, len(flat), 2)]
    leased = _leased(client, key, out)
    if leased is not None:
        out["leased"] = leased
    return out


def _leased(client: ratelimit.Client, key: str, raw: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """Leases outstanding on a key, where its state shows them (docs/semantics.md,
    "Leases"): token_bucket and leaky_bucket store a leased block as of the
    end of its validity (ts ahead of now: {"ahead_ms"}); sliding_log logs
    each block as one member at that end ({"ahead_ms", "permits"}: the
    members ahead). The other algorithms' blocks look like any admission."""
    parsed = parse_key(key, client.prefix or "")
    algorithm = parsed and parsed.get("algorithm")
    if algorithm not in ("token_bucket", "leaky_bucket", "sliding_log"):
        return None
    seconds, micros = client._command(["TIME"], key=key)
    now = int(seconds) * 1000 + int(micros) // 1000
    if algorithm == "sliding_log":
        flat = client._command(["ZRANGEBYSCORE", key, "(%d" % now, "+inf", "WITHSCORES"], key=key)
        if not flat:
            return None
        permits = sum(int(flat[i].decode().split(":")[2]) for i in range(0, len(flat), 2))
        return {"ahead_ms": int(float(flat[-1])) - now, "permits": permits}
    ts = int(raw.get("fields", {}).get("ts", now))
    return {"ahead_ms": ts - now} if ts > now else None


def _state(client: ratelimit.Client, args: argparse.Namespace) -> Dict[str, Any]:
    """An entity's state: with a spec (given or stored) a peek and its keys,
    else the keys it has, whatever made them."""
    stored = client.get_config(args.name) if args.rate is None else None
    found = _state_keys(client, args, stored)
    lim = _limiter(client, args, found, stored)
    if lim is None:
        _check_algorithm(args, found, args.algorithm)
        found = {alg: keys for alg, keys in found.items() if args.algorithm in (None, alg)}
        if not found:
            raise Failure("%s / %s: no state, and no spec is stored for limiter %r: give --rate"
                          % (args.name, args.id, args.name), EXIT_NOT_FOUND)
        return {"name": args.name, "id": args.id, "spec": None, "algorithm": ", ".join(sorted(found)),
                "peek": None, "keys": [_raw(client, k) for keys in found.values() for k in keys]}
    keys = lim.keys(args.id)
    # the given spec may have fewer rates than the state: show those too
    keys += [k for k in found.get(lim.config.algorithm, []) if k not in keys]
    return {"name": lim.name, "id": args.id, "spec": str(lim.config), "algorithm": lim.config.algorithm,
            "peek": _result_data(lim.peek(args.id)), "keys": [_raw(client, k) for k in keys]}


def _state_lines(data: Dict[str, Any]) -> List[str]:
    p = data["peek"]
    if p is None:
        lines = ["%s / %s: %s (no spec stored: give --rate for remaining and retry times)"
                 % (data["name"], data["id"], data["algorithm"])]
    else:
        lines = ["%s / %s: %s" % (data["name"], data["id"], data["spec"]),
                 "  remaining %d of %d%s, retry after %s, full again in %s" % (
                     p["remaining"], p["limit"], "" if p["allowed"] else " (denied)", _seconds(p["retry_after"]),
                     _seconds(p["reset_after"]))]
    for k in data["keys"]:
        if k["type"] == "none":
            lines.append("  %s: no state (full)" % k["key"])
            continue
        what = k.get("fields", k.get("value", "%s members" % k.get("members")))
        lines.append("  %s (%s, ttl %s): %s" % (k["key"], k["type"], _ttl(k["pttl"]), what))
        leased = k.get("leased")
        if leased:
            lines.append("    leased: %sbooked until %s from now (a client may still spend it; unused permits go "
                         "back when its lease ends)" % ("%d permits " % leased["permits"] if "permits" in leased else "",
                                                        _seconds(leased["ahead_ms"] / 1000)))
    return lines


def cmd_show(client: ratelimit.Client, args: argparse.Namespace) -> int:
    data = _state(client, args)
    _emit(args, data, _state_lines(data))
    return EXIT_OK if data["peek"] is None or data["peek"]["allowed"] else EXIT_NOT_FOUND


def cmd_reset(client: ratelimit.Client, args: argparse.Namespace) -> int:
    stored = client.get_config(args.name) if args.rate is None else None
    found = _state_keys(client, args, stored)
    lim = _limiter(client, args, found, stored)
    algorithm = lim.config.algorithm if lim else args.algorithm
    _check_algorithm(args, found, algorithm)
    # every rate's key, also those of rates the spec no longer has
    keys = [k for alg, ks in found.items() if algorithm in (None, alg) for k in ks]
    deleted = client._command(["DEL"] + keys, key=keys[0]) if keys else 0
    if lim is not None:
        lim.reset(args.id)
    left = [k for k in keys if client._command(["EXISTS", k], key=k)]
    if left:  # written again meanwhile? say so rather than claim a reset
        raise Failure("%s / %s: %s still exist%s after the reset" % (
            args.name, args.id, ", ".join(left), "s" if len(left) == 1 else ""), EXIT_REDIS)
    _emit(args, {"name": args.name, "id": args.id, "deleted": deleted, "keys": keys},
          ["%s / %s: reset (%s)" % (args.name, args.id, "%d key%s deleted: %s" % (
              deleted, "" if deleted == 1 else "s", " ".join(keys)) if deleted else "there was no state")])
    return EXIT_OK


def cmd_config(client: ratelimit.Client, args: argparse.Namespace) -> int:
    if args.action == "get":
        config = client.get_config(args.name)
        if config is None:
            _emit(args, None, ["no spec is stored for %r" % args.name])
            return EXIT_NOT_FOUND
        _emit(args, _config_data(config), ["%s: %s" % (args.name, config)])
        return EXIT_OK
    if args.action == "delete":
        deleted = client.delete_config(args.name)
        _emit(args, {"deleted": deleted}, ["%s: %s" % (args.name, "deleted" if deleted else "no spec was stored")])
        return EXIT_OK if deleted else EXIT_NOT_FOUND
    stored = client.configure(args.name, args.rate, algorithm=args.algorithm or "gcra", burst=_burst(args),
                              initial_tokens=args.initial_tokens, per_client=args.per_client,
                              if_absent=args.if_absent)
    config = client.get_config(args.name)
    _emit(args, {"set": stored, "spec": _config_data(config) if config else None},
          ["%s: %s%s" % (args.name, "stored " if stored else "already stored, kept: ", config)])
    return EXIT_OK if stored else EXIT_NOT_FOUND


def cmd_watch(client: ratelimit.Client, args: argparse.Namespace) -> int:
    tty = sys.stdout.isatty() and not args.json
    n = 0
    try:
        while args.count is None or n < args.count:
            if n:
                time.sleep(args.interval)
            data = _state(client, args)
            data["time"] = time.time()
            if args.json:
                print(json.dumps(data, sort_keys=True), flush=True)
            else:
                lines = _state_lines(data)
                stamp = time.strftime("%H:%M:%S")
                if tty:  # redraw in place
                    sys.stdout.write("\033[H\033[2J%s  (every %gs, Ctrl-C to stop)\n" % (stamp, args.interval))
                    sys.stdout.write("\n".join(lines) + "\n")
                else:
                    sys.stdout.write("%s %s\n" % (stamp, lines[-1 if data["peek"] is None else 1].strip()))
                sys.stdout.flush()
            n += 1
    except KeyboardInterrupt:
        pass
    return EXIT_OK


def cmd_bench(args: argparse.Namespace) -> int:
    client = _open(args.bench_url, args)
    try:
        lim = client.limiter("ratelimit-bench", (10**12, 1.0))
        stop = time.monotonic() + args.seconds
        counts = [0] * args.threads
        errors: List[BaseException] = []

        def run(i: int) -> None:
            ident = "bench-%d-%d" % (os.getpid(), i)
            try:
                while time.monotonic() < stop:
                    lim.acquire(ident)
                    counts[i] += 1
            except BaseException as e:  # reported by the main thread
                errors.append(e)
            finally:
                try:
                    lim.reset(ident)
                except ratelimit.RateLimitError:
                    pass

        started = time.monotonic()
        threads = [threading.Thread(target=run, args=(i,)) for i in range(args.threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        elapsed = time.monotonic() - started
        total = sum(counts)
        _emit(args, {"decisions": total, "seconds": round(elapsed, 3), "threads": args.threads,
                     "per_second": round(total / elapsed, 1)},
              ["%d decisions/s (%d in %.2f s, %d threads, gcra, one key per thread)"
               % (total / elapsed, total, elapsed, args.threads)])
    finally:
        client.close()
    return EXIT_OK


# ---- main ---------------------------------------------------------------------------------


def _global_options(p: argparse.ArgumentParser, defaults: bool) -> None:
    """The options every command takes, before or after its name (a
    command's parser leaves them unset so the main parser's hold)."""
    def add(*names: str, default: Any = None, **kw: Any) -> None:
        p.add_argument(*names, default=default if defaults else argparse.SUPPRESS, **kw)
    add("--url", default=os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0",
        help="Redis URL, as the clients take it (default: $REDIS_URL, else redis://127.0.0.1:6379/0)")
    add("--prefix", default="rl", help="key prefix (default rl)")
    add("--json", default=False, action="store_true",
        help="machine-readable output (one JSON document per line)")
    add("--timeout", default=2.0, type=float, help="seconds to connect and per command (default 2)")
    add("--client-id", help="the client id per_client limiters are seen as (show, reset, watch)")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="ratelimit", description="Look at and manage ratelimit limiters in Redis.",
                epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    _global_options(p, True)
    common = argparse.ArgumentParser(add_help=False)
    _global_options(common, False)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    real_add = sub.add_parser
    sub.add_parser = lambda *a, **kw: real_add(*a, parents=[common], **kw)  # type: ignore[method-assign]

    ls = sub.add_parser("ls", help="limiters, entities and stored specs (SCAN; every master of a cluster)")
    ls.add_argument("pattern", nargs="?", default="*", help="glob on the limiter name (default *)")
    ls.add_argument("--all", action="store_true", help="also semaphores, locks and delay queues")

    for name, helptext in (("show", "an entity's state: a peek (remaining, retry, reset), the raw keys and the leases "
                                    "they show"),
                           ("reset", "delete an entity's state (it starts afresh)"),
                           ("watch", "show, refreshed live until Ctrl-C")):
        c = sub.add_parser(name, help=helptext)
        c.add_argument("name")
        c.add_argument("id")
        _spec_args(c)
        if name == "watch":
            c.add_argument("--interval", type=float, default=1.0, help="seconds between refreshes (default 1)")
            c.add_argument("--count", type=int, help="stop after this many refreshes")

    cfg = sub.add_parser("config", help="the spec stored in Redis for a limiter: get, set, delete")
    acts = cfg.add_subparsers(dest="action", metavar="ACTION", parser_class=_Parser)
    acts.required = True
    real_act = acts.add_parser
    acts.add_parser = lambda *a, **kw: real_act(*a, parents=[common], **kw)  # type: ignore[method-assign]
    acts.add_parser("get", help="print the stored spec").add_argument("name")
    acts.add_parser("delete", help="delete the stored spec").add_argument("name")
    s = acts.add_parser("set", help="store a spec (limiters made without a rate use it)")
    s.add_argument("name")
    s.add_argument("rate", help="e.g. 10/second or '10/second;1000/hour'")
    s.add_argument("--algorithm", help="default gcra")
    s.add_argument("--burst", type=int, action="append", help="burst (repeat: one per rate)")
    s.add_argument("--initial-tokens", type=int, help="permits a new entity starts with (default: full)")
    s.add_argument("--per-client", action="store_true", help="a quota per client")
    s.add_argument("--if-absent", action="store_true", help="keep a spec already stored (exit 1 then)")

    b = sub.add_parser("bench", help="decisions per second against a Redis")
    b.add_argument("bench_url", metavar="URL")
    b.add_argument("--seconds", type=float, default=3.0, help="how long (default 3)")
    b.add_argument("--threads", type=int, default=4, help="threads deciding at once (default 4)")
    return p


def _open(url: str, args: argparse.Namespace) -> ratelimit.Client:
    return ratelimit.Client(url, prefix=args.prefix, timeout=args.timeout, connect_timeout=args.timeout,
                            client_id=args.client_id)


COMMANDS = {"ls": cmd_ls, "show": cmd_show, "reset": cmd_reset, "watch": cmd_watch, "config": cmd_config}


def main(argv: Optional[List[str]] = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.command == "bench":
            return cmd_bench(args)
        client = _open(args.url, args)
        try:
            return COMMANDS[args.command](client, args)
        finally:
            client.close()
    except Failure as e:
        return _fail(str(e), e.code)
    except ratelimit.InvalidArgument as e:
        return _fail(str(e), EXIT_USAGE)
    except ratelimit.RedisFailure as e:
        return _fail(str(e), EXIT_REDIS)
    except ratelimit.RateLimitError as e:
        return _fail(str(e), EXIT_REDIS)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # | head
        return EXIT_OK


def _fail(message: str, code: int) -> int:
    print("ratelimit: %s" % " ".join(message.split()), file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
