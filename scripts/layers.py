"""The core's files depend downward only: from the symbols each object file
of the library defines and uses (nm), every file may call files of its own
layer or lower only, and every file has a layer. Prints the largest set of
files that call each other (what is still one knot).
Usage: python3 scripts/layers.py BUILD_DIR"""
import collections
import pathlib
import subprocess
import sys

# Lowest first, each with why its files sit there. An engine calls a feature
# back only through what the feature set (rl_await.timed, rl_areq.lease_ended
# and reset_done, the client's leases_tick and closing_work).
LAYERS = [
    # no I/O: errors, the clock, fork hooks, replies, rates, URLs, keys,
    # completion queues, the calls in flight (calls), the metrics' counters
    ("base", {"error", "platform", "fork", "reply", "rate", "url", "keys", "completions", "calls", "stats"}),
    # commands and replies on the wire (a decision's, a primitive's),
    # connections, where a command goes
    ("transport", {"command", "conn", "topology", "protocol", "decision_commands", "primitive_commands"}),
    # the leases' table and its decisions: no client, connection or thread
    ("policy", {"lease_policy"}),
    # what moves commands: the blocking engine (run, combine) and the I/O
    # thread's (async, dialer, requests, waits, threads)
    ("engines", {"run", "combine", "async", "dialer", "requests", "waits", "threads"}),
    # what a decision or a primitive means, carried by the engines: rate
    # limits, stored specs, leases, semaphore / lock / queue
    ("features", {"limiter", "config", "lease", "lease_async", "sync"}),
    # the client's life and the entry points built on the others:
    # asynchronous submissions, the timed acquire (on rl_submit), raw
    # commands, structs that grow
    ("api", {"client", "closing", "submit", "acquire_wait", "raw", "abi"}),
]


def calls(objects):
    defined, used = {}, collections.defaultdict(set)
    for obj in objects:
        name = obj.name.removesuffix(".c.o")
        for line in subprocess.run(["nm", str(obj)], capture_output=True, text=True, check=True).stdout.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "TDBR":
                defined[parts[2]] = name
            elif len(parts) == 2 and parts[0] == "U":
                used[name].add(parts[1])
    # file -> the files it calls -> the symbols it calls there
    graph = collections.defaultdict(lambda: collections.defaultdict(list))
    for f, syms in used.items():
        for s in sorted(syms):
            if defined.get(s, f) != f:
                graph[f][defined[s]].append(s)
    for f in defined.values():
        graph[f]
    return graph


def largest_knot(graph):
    index, low, stack, on, knots = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            knot = set()
            while True:
                w = stack.pop()
                on.discard(w)
                knot.add(w)
                if w == v:
                    break
            knots.append(knot)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return max(knots, key=len)


def main(build):
    objects = sorted(pathlib.Path(build, "CMakeFiles/ratelimit_objects.dir/core/src").glob("*.c.o"))
    if not objects:
        sys.exit(f"no object files of the core under {build}")
    graph = calls(objects)
    rank = {f: i for i, (_, files) in enumerate(LAYERS) for f in files}
    wrong = [f"{f} has no layer (LAYERS in scripts/layers.py)" for f in sorted(graph) if f not in rank]
    wrong += [f"{f} ({LAYERS[rank[f]][0]}) calls {g} ({LAYERS[rank[g]][0]}): {' '.join(syms)}"
              for f in sorted(graph) if f in rank for g, syms in sorted(graph[f].items()) if rank.get(g, 0) > rank[f]]
    knot = largest_knot(graph)
    print(f"layers: {len(graph)} files; the largest set calling each other: {len(knot)} ({', '.join(sorted(knot))})")
    if wrong:
        sys.exit("a file calls a layer above its own:\n  " + "\n  ".join(wrong))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "build")
