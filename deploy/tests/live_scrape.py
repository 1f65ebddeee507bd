#!/usr/bin/python3
"""Starts a real coordinator and two CPU workers on 127.0.0.1, runs a tiny job for a few steps,
and prints the metric names their /metrics endpoints export, one per line with its type and
label names: `name type label,label` (a histogram's labels include those of its _bucket,
_sum and _count series, but not `le`).

prometheus-cpp only exposes a family once it has a series, so the job must step (for the
pipetrain_job_* families), evaluate after its first step (for pipetrain_job_validation_*), and
one RPC must fail (for pipetrain_coordinator_rpc_errors_total).
Usage: live_scrape.py BUILD_DIR  (exit 1 with the reason if anything does not come up)
"""
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

TINY_JOB = """\
name: deploy-check
model: {num_layers: 4, hidden: 16, num_heads: 2, ffn_hidden: 32}
training: {steps: 3, microbatch_size: 2, global_batch: 8, seed: 7, optimizer: {learning_rate: 0.003}}
parallelism: {num_workers: 2, schedule: 1f1b}
eval: {interval_steps: 1, batches: 2}
"""
DEADLINE_S = 40


def fail(msg: str) -> None:
    print(f"live_scrape: {msg}", file=sys.stderr)
    sys.exit(1)


def start(argv, log_path):
    log = open(log_path, "w")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True)
    return proc


def read_addresses(proc, want, name):
    """Reads the daemon's first stdout lines ("listening on H:P", "metrics on H:P", ...)."""
    found = {}
    deadline = time.time() + 15
    while len(found) < len(want) and time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        m = re.match(r"(\w+) on (\S+)", line.strip())
        if m and m.group(1) in want:
            found[m.group(1)] = m.group(2)
    if len(found) < len(want):
        fail(f"{name} did not print {want} (got {found}); see its log")
    return found


def scrape(address):
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as r:
        return r.read().decode()


def names(text):
    """{metric name: (type, set of label names)} from the text exposition format."""
    found = {m.group(1): (m.group(2), set())
             for m in re.finditer(r"^# TYPE (\S+) (\S+)", text, re.M)}
    for m in re.finditer(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}", text, re.M):
        base = m.group(1)
        if base not in found:  # histogram/summary parts (_bucket, _sum, _count)
            base = re.sub(r"_(bucket|sum|count)$", "", base)
            if base not in found:
                continue
        labels = set(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', m.group(2))) - {"le", "quantile"}
        found[base][1].update(labels)
    return found


def merge(into, more):
    for k, (kind, labels) in more.items():
        into.setdefault(k, (kind, set()))[1].update(labels)


def main() -> None:
    build = sys.argv[1]
    coord_bin = os.path.join(build, "coordinator/pipetrain-coordinator")
    worker_bin = os.path.join(build, "worker/pipetrain-worker")
    cli_bin = os.path.join(build, "client/pipetrain")
    for b in (coord_bin, worker_bin, cli_bin):
        if not os.access(b, os.X_OK):
            fail(f"{b} is missing: build first (scripts/build.sh)")
    tmp = tempfile.mkdtemp(prefix="pipetrain-deploy-check-")
    procs = []
    try:
        coord = start([coord_bin, "--listen=127.0.0.1:0", "--metrics-listen=127.0.0.1:0",
                       f"--db={tmp}/jobs.db", "--heartbeat-timeout-s=5"], f"{tmp}/coordinator.log")
        procs.append(coord)
        c = read_addresses(coord, {"listening", "metrics"}, "coordinator")
        workers = []
        for i in range(2):
            w = start([worker_bin, f"--coordinator={c['listening']}", "--listen=127.0.0.1:0",
                       "--transport-listen=127.0.0.1:0", "--metrics-listen=127.0.0.1:0",
                       f"--name=check-{i}"], f"{tmp}/worker{i}.log")
            procs.append(w)
            workers.append(read_addresses(w, {"listening", "transport", "metrics"}, f"worker {i}"))
        with open(f"{tmp}/job.yaml", "w") as f:
            f.write(TINY_JOB)
        submit = subprocess.run([cli_bin, "submit", "--coordinator", c["listening"],
                                 f"{tmp}/job.yaml"], capture_output=True, text=True, timeout=20)
        if submit.returncode != 0:
            fail(f"pipetrain submit failed: {submit.stdout}{submit.stderr}")
        # A NOT_FOUND answer, so the RPC error family has a series.
        subprocess.run([cli_bin, "status", "--coordinator", c["listening"], "job-does-not-exist"],
                       capture_output=True, timeout=20)
        deadline = time.time() + DEADLINE_S
        while True:
            exported = names(scrape(c["metrics"]))
            if "pipetrain_job_steps_total" in exported:
                break
            if time.time() > deadline:
                logs = "".join(open(f"{tmp}/{n}").read()[-1500:]
                               for n in ("coordinator.log", "worker0.log"))
                fail(f"no completed step within {DEADLINE_S}s; logs:\n{logs}")
            time.sleep(0.3)
        for w in workers:
            merge(exported, names(scrape(w["metrics"])))
        for name in sorted(exported):
            kind, labels = exported[name]
            print(name, kind, ",".join(sorted(labels)))
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    main()
