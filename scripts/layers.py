"""The core's lower layers call nothing above them: from the symbols each
object file of the library defines and uses (nm), every file of a layer
below "upper" may call files of its own layer or lower only. Prints the
largest set of files that call each other (what is still one knot).
Usage: python3 scripts/layers.py BUILD_DIR"""
import collections
import pathlib
import subprocess
import sys

LAYERS = [
    ("base", {"error", "platform", "fork", "reply", "rate", "url", "keys", "completions"}),
    ("transport", {"command", "conn", "topology", "protocol"}),
    ("policy", {"lease_policy"}),
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
    graph = {f: {defined[s] for s in syms if s in defined and defined[s] != f} for f, syms in used.items()}
    for f in defined.values():
        graph.setdefault(f, set())
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
    wrong = [f"{f} ({LAYERS[rank[f]][0]}) calls {g}" for f in sorted(graph) if f in rank
             for g in sorted(graph[f]) if rank.get(g, len(LAYERS)) > rank[f]]
    knot = largest_knot(graph)
    print(f"layers: {len(graph)} files; the largest set calling each other: {len(knot)} ({', '.join(sorted(knot))})")
    if wrong:
        sys.exit("a lower layer calls up:\n  " + "\n  ".join(wrong))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "build")
