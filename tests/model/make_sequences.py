"""Writes sequences.json: random request sequences for every algorithm (all
ops, several rates, initial tokens, rate changes, time jumps, two ids),
each step with the model's expected result and keys. Before writing, every
sequence is run through the Python binding on a throwaway redis-server and
must agree step for step, so the file only records what the model and the
library both say. ModelReplayTest (JUnit) replays it through the Java
binding; test_model.py replays it through Python.

    build/venv/bin/python tests/model/make_sequences.py [--seed N] [--per-algorithm N] > tests/model/sequences.json"""
import argparse
import json
import pathlib
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))

import harness  # noqa: E402
from admissions import Admissions  # noqa: E402
import limiter_model as m  # noqa: E402

T0 = 1_700_000_000_000
IDS = ("a", "b")
PERIODS = [1, 2, 7, 10, 100, 250, 999, 1000, 1001, 3000, 60000]
LIMITS = [1, 2, 3, 5, 10, 16, 100, 1000]


def random_rate(rng: random.Random, algorithm: str) -> m.Rate:
    limit = rng.choice(LIMITS) if rng.random() < 0.7 else rng.randint(1, 50)
    period = rng.choice(PERIODS) if rng.random() < 0.6 else rng.randint(1, 5000)
    burst = 0
    if algorithm in ("token_bucket", "gcra") and rng.random() < 0.5:
        burst = rng.randint(1, 2 * limit + 1)
    return m.Rate(limit, period, burst)


def random_spec(rng: random.Random, algorithm: str) -> m.Spec:
    rates = tuple(random_rate(rng, algorithm) for _ in range(rng.choice([1, 1, 1, 2, 2, 3])))
    initial = None
    if algorithm in m.BUCKETS and rng.random() < 0.4:
        initial = rng.randint(0, max(r.capacity(algorithm) for r in rates) + 1)
    return m.Spec(algorithm, rates, initial)


def random_dt(rng: random.Random, spec: m.Spec, back: bool) -> int:
    period = rng.choice(spec.rates).period
    kind = rng.random()
    if back and kind < 0.05:
        return -rng.randint(1, period)
    if kind < 0.3:
        return 0
    if kind < 0.5:
        return rng.randint(1, 3)
    if kind < 0.75:
        return rng.randint(1, period)
    if kind < 0.9:
        return max(0, period + rng.randint(-2, 2))  # around a window edge
    return rng.randint(period, 3 * period)


def random_sequence(rng: random.Random, algorithm: str, length: int):
    """{"algorithm", "specs": [spec json], "steps": [step without expectations]}."""
    specs = [random_spec(rng, algorithm)]
    spec_index = 0
    now = T0 + rng.randint(0, 10 ** 6)  # windows aligned differently each time
    back = algorithm == "sliding_log"  # the only one that documents a clock going back
    steps = []
    for _ in range(length):
        spec = specs[spec_index]
        now = max(T0, now + random_dt(rng, spec, back))
        if rng.random() < 0.08:  # a rate change
            if rng.random() < 0.5 or len(specs) == 1:
                specs.append(random_spec(rng, algorithm))
                spec_index = len(specs) - 1
            else:
                spec_index = rng.randrange(len(specs))
            spec = specs[spec_index]
        ops = ["acquire"] * 6 + ["peek"] * 2 + ["acquire_up_to"] * 2 + ["refund"] + ["reset"] * (rng.random() < 0.2)
        if algorithm in m.BUCKETS:
            ops += ["reserve"] * 3
        op = rng.choice(ops)
        if rng.random() < 0.01:
            op = "reserve"  # refused for the windows
        capacity = spec.capacity()
        step = {"op": op, "id": rng.choice(IDS), "now_ms": now, "spec": spec_index}
        if op != "reset":
            step["permits"] = rng.randint(1, capacity) if rng.random() < 0.8 else rng.randint(1, min(capacity, 3))
            if op == "acquire_up_to":
                step["permits"] = rng.randint(1, 2 * capacity + 1)
            elif rng.random() < 0.02:
                step["permits"] = capacity + 1  # refused: more than it can hold
            if op == "reserve":
                step["max_wait_ms"] = rng.choice([0, rng.randint(1, 2 * spec.rates[0].period)])
        steps.append(step)
    return {"algorithm": algorithm, "specs": [s.to_json() for s in specs], "steps": steps}


def annotate(seq):
    """Adds the model's expectations to every step, in the file's compact
    form: "expect" [allowed 0/1, limit, remaining, retry_after_ms,
    reset_after_ms, wait_ms, granted, rate_index], "keys" the state of the
    step's id's keys for rates 1..3 (TTL ms, "kept" or "absent")."""
    model = m.Model(harness.PREFIX, harness.NAME)
    specs = [m.Spec.from_json(s) for s in seq["specs"]]
    for step in seq["steps"]:
        want = harness.expect(model, specs[step["spec"]], step)
        if "expect" in want:
            want["expect"] = [int(v) for v in want["expect"].values()]
        want["keys"] = list(want["keys"].values())
        if not want["expire"]:
            del want["expire"]
        step.update(want)
    return seq


def expanded(algorithm, step):
    """A compact step as harness.run_step takes it."""
    out = dict(step, keys=dict(zip(harness.id_keys(algorithm, step["id"]), step["keys"])))
    if "expect" in step:
        out["expect"] = dict(zip(harness.FIELDS, [bool(step["expect"][0])] + step["expect"][1:]))
    return out


def run_sequence(book, call, seq, label):
    """Replays an annotated sequence through a binding (run_step raises on a
    difference) and holds its admissions to the invariant."""
    book.flush()
    specs = [m.Spec.from_json(s) for s in seq["specs"]]
    admitted = Admissions(seq["algorithm"])
    for i, step in enumerate(seq["steps"]):
        want = expanded(seq["algorithm"], step)
        result = harness.run_step(book, call, specs[step["spec"]], want, want, f"{label} step {i}")
        admitted.record(specs[step["spec"]], step, result)


def redis_server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    d = tempfile.mkdtemp(prefix="rl-model-")
    proc = subprocess.Popen([shutil.which("redis-server"), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", d], stdout=subprocess.DEVNULL)
    for _ in range(500):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return proc, port, d
        except OSError:
            time.sleep(0.01)
    raise RuntimeError("redis-server did not start")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--per-algorithm", type=int, default=16)
    ap.add_argument("--steps", type=int, default=40)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    proc, port, d = redis_server()
    try:
        book, python = harness.Book(port), harness.PythonLimiters(f"redis://127.0.0.1:{port}")
        sequences = []
        for algorithm in m.ALGORITHMS:
            for n in range(args.per_algorithm):
                seq = annotate(random_sequence(rng, algorithm, args.steps))
                run_sequence(book, python, seq, f"{algorithm} #{n}")
                sequences.append(seq)
        python.close()
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(d, ignore_errors=True)
    doc = {"about": "Random request sequences with the results the reference model (tests/model/limiter_model.py) "
                    "and the Python binding agree on; ModelReplayTest replays them through Java. Steps as "
                    "tests/model/harness.py describes, compact: expect = [allowed 0/1, limit, remaining, "
                    "retry_after_ms, reset_after_ms, wait_ms, granted, rate_index], keys = the step's id's keys "
                    "for rates 1..3 (prefix:{name:id}:algorithm, then :2, :3): TTL ms, 'kept' or 'absent'. "
                    "Keys expire on the explicit clock: delete the keys of 'expire' before a step, park them "
                    "after it (PEXPIREAT 32503680000000: an untouched key shows that expiry). Regenerate: "
                    "python tests/model/make_sequences.py > tests/model/sequences.json",
           "prefix": harness.PREFIX, "name": harness.NAME, "seed": args.seed, "sequences": sequences}
    sys.stdout.write(dumps(doc))


def dumps(doc):
    """JSON with one step per line, so that a change reads as a diff."""
    def j(v):
        return json.dumps(v, separators=(",", ":"))
    head = {k: v for k, v in doc.items() if k != "sequences"}
    out = [j(head)[:-1] + ',"sequences":[']
    for i, seq in enumerate(doc["sequences"]):
        out.append('{"algorithm":%s,"specs":%s,"steps":[' % (j(seq["algorithm"]), j(seq["specs"])))
        out.append(",\n".join(j(step) for step in seq["steps"]))
        out.append("]}" + ("," if i + 1 < len(doc["sequences"]) else ""))
    out.append("]}")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
