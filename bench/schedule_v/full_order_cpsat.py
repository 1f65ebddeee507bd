#!/usr/bin/env python3
"""How short can a whole V schedule be under a memory cap? (CP-SAT over all orders.)

An independent yardstick for the V generators (docs/SCHEDULES.md, Known gaps), sharing no code
with pipetrain: every F, B, W of every (stage, microbatch) is a task; V placement (worker i
holds stages i and 2p-1-i); chain dependencies with comm between workers; no two tasks of a
worker overlap; activation memory alive from F start to W end, at most --cap-chunks chunk
activations per worker (V-Half at p workers: 2 * ((p+2)//2)); objective: the longest worker
span (first start to last end), the denominator of pipetrain's bubble. Integer time: pick a
unit in which all costs are whole numbers (1:1.5:0.5 with comm 0.2 per worker share -> chunk
F=10 B=15 W=5 comm 4 in 0.05-units).

Only small cells solve (p <= 4, m <= 16 in minutes); the solver's best FEASIBLE answer is an
upper bound on the best achievable bubble, its bound a (usually weak) lower bound. With
--max-span S it asks whether any schedule is that short; INFEASIBLE would be a proof that none is.

Needs `pip install ortools` (not a pipetrain dependency; research only).
With --hint-json the solver starts from a pipetrain plan (a feasible solution to improve on).

Example (p=4, m=8, 1:1.5:0.5, comm 0.2; 1F1B's bubble there is 0.337):
  full_order_cpsat.py --p 4 --m 8 --costs 10,15,5 --comm 4 --cap-chunks 6 --seconds 120
found a schedule with bubble 0.264 on 2026-11-25.
"""
import argparse

from ortools.sat.python import cp_model


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--p", type=int, required=True, help="workers")
    ap.add_argument("--m", type=int, required=True, help="microbatches")
    ap.add_argument("--costs", required=True, help="chunk F,B,W in integer time units")
    ap.add_argument("--comm", type=int, default=0, help="transfer time between workers")
    ap.add_argument("--cap-chunks", type=int, required=True, help="peak, in chunk activations")
    ap.add_argument("--seconds", type=float, default=60.0, help="solver time limit")
    ap.add_argument("--max-span", type=int, help="only spans <= this (a proof of INFEASIBLE shows"
                    " that no V schedule under the cap is that short)")
    ap.add_argument("--print-orders", action="store_true", help="print each worker's order")
    ap.add_argument("--hint-json", help="start from this plan: `pipetrain plan --format json` output"
                    " for the same cell (its timeline's times are multiplied by --hint-scale)")
    ap.add_argument("--hint-scale", type=float, default=20.0,
                    help="time units per unit of the plan's time (0.05-units: 20)")
    a = ap.parse_args()
    p, mbs = a.p, a.m
    f, b, w = (int(x) for x in a.costs.split(","))
    n = 2 * p
    worker = lambda s: s if s < p else n - 1 - s
    comm = lambda s, t: 0 if worker(s) == worker(t) else a.comm
    horizon = mbs * n * (f + b + w) + 4 * n * a.comm
    md = cp_model.CpModel()
    var = lambda: md.NewIntVar(0, horizon, "")
    F = [[var() for _ in range(n)] for _ in range(mbs)]
    B = [[var() for _ in range(n)] for _ in range(mbs)]
    W = [[var() for _ in range(n)] for _ in range(mbs)]
    busy = {i: [] for i in range(p)}
    held = {i: [] for i in range(p)}
    for j in range(mbs):
        for s in range(n - 1):
            md.Add(F[j][s + 1] >= F[j][s] + f + comm(s, s + 1))
            md.Add(B[j][s] >= B[j][s + 1] + b + comm(s + 1, s))
        md.Add(B[j][n - 1] >= F[j][n - 1] + f)
        for s in range(n):
            md.Add(W[j][s] >= B[j][s] + b)
            i = worker(s)
            for start, length in ((F[j][s], f), (B[j][s], b), (W[j][s], w)):
                busy[i].append(md.NewIntervalVar(start, length, start + length, ""))
            size = md.NewIntVar(f + b + w, horizon, "")
            held[i].append(md.NewIntervalVar(F[j][s], size, W[j][s] + w, ""))
        if j > 0:  # symmetry: microbatches enter in order
            md.Add(F[j][0] >= F[j - 1][0] + f)
    span = var()
    for i in range(p):
        md.AddNoOverlap(busy[i])
        md.AddCumulative(held[i], [1] * len(held[i]), a.cap_chunks)
        first, last = var(), var()
        md.AddMinEquality(first, [F[j][s] for j in range(mbs) for s in range(n) if worker(s) == i])
        md.AddMaxEquality(last, [W[j][s] + w for j in range(mbs) for s in range(n) if worker(s) == i])
        md.Add(span >= last - first)
    if a.hint_json:
        import json
        import re
        plan = json.load(open(a.hint_json))
        names = {"F": F, "I": B, "W": W}
        for t in plan["timeline"]:
            stage, kind, mb = re.fullmatch(r"(\d+)([FIW])(\d+)", t["action"]).groups()
            md.AddHint(names[kind][int(mb)][int(stage)], round(t["start"] * a.hint_scale))
    if a.max_span is not None:
        md.Add(span <= a.max_span)
    md.Minimize(span)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = a.seconds
    solver.parameters.num_workers = 2
    status = solver.Solve(md)
    work = mbs * 2 * (f + b + w)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        print(solver.StatusName(status))
        return
    print(f"{solver.StatusName(status)} span {solver.Value(span)} bound {solver.BestObjectiveBound():.0f}"
          f" bubble {1 - work / solver.Value(span):.4f}")
    if a.print_orders:
        for i in range(p):
            tasks = []
            for j in range(mbs):
                for s in range(n):
                    if worker(s) == i:
                        for name, v in (("F", F), ("B", B), ("W", W)):
                            tasks.append((solver.Value(v[j][s]), f"{s}{name}{j}"))
            print(f"w{i}", " ".join(t for _, t in sorted(tasks)))


if __name__ == "__main__":
    main()
