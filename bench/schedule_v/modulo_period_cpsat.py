#!/usr/bin/env python3
"""Is there ONE V-shape building block that repeats every `period` within a memory cap?

An independent check of schedule/v_modulo_block.h (docs/SCHEDULES.md, Known gaps):
the same question as a CP-SAT model, sharing no code with pipetrain. Integer time (pick a unit
in which all costs are whole numbers, e.g. 0.1: 1:2:1 -> chunk F=5 B=10 W=5, comm 0.2 -> 2).

Model: microbatch 0's F/B/W of every stage (V placement: worker i holds stages i and 2p-1-i),
chain dependencies with comm between workers; modulo the period no two passes of a worker
overlap (each pass is placed at its phase and one period later, which catches wrap-around);
memory: at every F start (where the count can rise) the copies alive of both chunks, with
alive = [F start, W end), sum to at most cap_chunks (V-Half at p workers: 2 * ((p+2)//2)).

Needs `pip install ortools` (not a pipetrain dependency; research only).
With --microbatches K the block holds K microbatches with their own chains (K copies of the
variables above, memory summed over them): a period of K x the per-microbatch period.

Example: modulo_period_cpsat.py --p 6 --costs 5,10,5 --comm 2 --period 43 --cap-chunks 8
prints INFEASIBLE (and FEASIBLE at --period 44). Against 1F1B's steady state (p=3, comm 0.2,
1:1.5:0.5 adds 3.267 per microbatch): --p 3 --costs 10,15,5 --comm 4 --cap-chunks 4
--microbatches 2 --period 131 (3.275 each) prints INFEASIBLE.
"""
import argparse

from ortools.sat.python import cp_model


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--p", type=int, required=True, help="workers")
    ap.add_argument("--costs", required=True, help="chunk F,B,W in integer time units")
    ap.add_argument("--comm", type=int, default=0, help="transfer time between workers")
    ap.add_argument("--period", type=int, required=True, help="block period")
    ap.add_argument("--microbatches", type=int, default=1,
                    help="microbatches per block, each with its own chain (period / this = per microbatch)")
    ap.add_argument("--cap-chunks", type=int, required=True, help="peak, in chunk activations")
    ap.add_argument("--seconds", type=float, default=60.0, help="solver time limit")
    ap.add_argument("--print-order", action="store_true",
                    help="when feasible, print each worker's cyclic order as JSON (kind, stage, "
                         "microbatch in the block, lap), the form of schedule/"
                         "cyclic_order.h")
    a = ap.parse_args()
    p, T, k = a.p, a.period, a.microbatches
    f, b, w = (int(x) for x in a.costs.split(","))
    n = 2 * p
    worker = lambda s: s if s < p else n - 1 - s
    comm = lambda s, t: 0 if worker(s) == worker(t) else a.comm
    horizon = 40 * T
    m = cp_model.CpModel()
    var = lambda: m.NewIntVar(0, horizon, "")
    F = [[var() for _ in range(n)] for _ in range(k)]
    B = [[var() for _ in range(n)] for _ in range(k)]
    W = [[var() for _ in range(n)] for _ in range(k)]
    m.Add(F[0][0] == 0)
    for c in range(k):
        if c > 0:  # symmetry: the block's microbatches enter in order, within one period
            m.Add(F[c][0] >= F[c - 1][0])
            m.Add(F[c][0] < T)
        for s in range(n - 1):
            m.Add(F[c][s + 1] >= F[c][s] + f + comm(s, s + 1))
        m.Add(B[c][n - 1] >= F[c][n - 1] + f)
        for s in range(n - 1, 0, -1):
            m.Add(B[c][s - 1] >= B[c][s] + b + comm(s, s - 1))
        for s in range(n):
            m.Add(W[c][s] >= B[c][s] + b)
    intervals = {i: [] for i in range(p)}
    for c in range(k):
        for s in range(n):
            for start, length in ((F[c][s], f), (B[c][s], b), (W[c][s], w)):
                wraps = m.NewIntVar(0, horizon // T + 1, "")
                phase = m.NewIntVar(0, T - 1, "")
                m.Add(start == wraps * T + phase)
                for shift in (0, T):
                    at = m.NewIntVar(0, 2 * T, "")
                    m.Add(at == phase + shift)
                    intervals[worker(s)].append(m.NewIntervalVar(at, length, at + length, ""))
    for i in intervals:
        m.AddNoOverlap(intervals[i])
    big = 100  # periods: keeps the divisions' numerators positive

    def alive(t, first, end):  # copies with first + jT <= t < end + jT
        x = m.NewIntVar(0, 3 * big, "")
        y = m.NewIntVar(0, 3 * big, "")
        m.AddDivisionEquality(x, t - first + big * T, T)
        m.AddDivisionEquality(y, t - end + big * T, T)
        return x - y

    for i in range(p):
        j = n - 1 - i
        for c0 in range(k):
            for t in (F[c0][i], F[c0][j]):
                m.Add(sum(alive(t, F[c][i], W[c][i] + w) + alive(t, F[c][j], W[c][j] + w)
                          for c in range(k)) <= a.cap_chunks)
    m.Minimize(sum(W[c][s] + w - F[c][s] for c in range(k) for s in range(n)))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = a.seconds
    solver.parameters.num_workers = 2
    status = solver.Solve(m)
    print(solver.StatusName(status))
    if a.print_order and status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        import json
        order = [[] for _ in range(p)]
        for c in range(k):
            for s in range(n):
                for kind, v in (("F", F[c][s]), ("B", B[c][s]), ("W", W[c][s])):
                    t = solver.Value(v)
                    # The pass at phase t mod T serves, in repetition r, the block r - t // T.
                    order[worker(s)].append((t % T, kind, s, c, -(t // T)))
        print(json.dumps([[list(x[1:]) for x in sorted(o)] for o in order]))


if __name__ == "__main__":
    main()
