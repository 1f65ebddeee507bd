#!/usr/bin/env python3
"""Independent baseline: the authors' V-Min / V-Half scheduler, re-implemented from the prose
and pseudo-code describing the authors' zbv_greedy (arXiv 2405.15362 and their code: fixed "stable
pattern", W filling, two reorder passes, eager real-cost timing). It shares no code with
pipetrain's generators; only the metric definitions are the same as pipetrain's Simulate:
  bubble = 1 - busy / longest worker span (costs uniform, so every worker is equally busy),
  peak   = max over workers and time of held activations, in units of one microbatch for a
           worker's share (each chunk holds 1/2; F +1/2, W -1/2, B 0).

Usage:
  authors_v_reference.py                       print the reference table for the grid
  authors_v_reference.py --compare DUMP_BIN    also run pipetrain (DUMP_BIN = the v_golden_dump
                                               binary, mode "reference-grid") and compare:
                                               exit 1 if pipetrain's bubble is worse at equal or
                                               lower peak memory anywhere (or its peak is higher)
Interpretations where the spec is terse (stated so they can be checked):
  - split_w: W's wait in one FIFO per chunk; an empty slot takes the oldest chunk-0 W if there is
    one, else the oldest chunk-1 W; leftovers are appended chunk 0 first.
  - reorder: nodes are visited in (slot, worker) order; a node in a movable phase goes to the
    earliest free slot >= 1 + the latest slot among its dependencies, if that is earlier than its
    slot and the worker's peak stays <= the target (the peak before the pass). W's stripped
    (consider_w False) count as if put_w placed them (their memory is recomputed after a move).
  - phases use worker 0: phase 0 = slots before its first chunk-0 B, phase 1 = up to its last
    chunk-0 F, phase 2 = after.
"""
import subprocess
import sys

F0, F1, BD, BU, W0, W1 = "F0", "F1", "BD", "BU", "W0", "W1"  # BD: chunk-1 B, BU: chunk-0 B


def pattern(kind, p, m):
    """Per worker: dict slot -> (type, mb) for F0, F1, BD, BU (no W)."""
    out = []
    for i in range(p):
        if kind == "v-min":
            d = 2 if p % 3 == 0 else 0
            off = [i, 2 * p - 1 - i, 2 * p + d + i, 4 * p + d - 1 - i]
        else:
            d = 3 if p % 2 == 0 else 0
            off = [2 * i, 3 * p - 2 - i, 3 * p + d + 2 * i - 1, 6 * p + d - 2 - i]
        slots = {}
        for k in range(m):
            for t, typ in zip(off, (F0, F1, BD, BU)):
                s = t + 6 * k
                assert s not in slots, "pattern collision"
                slots[s] = (typ, k)
        out.append(slots)
    return out


def put_w(slots, split):
    """Fills empty slots with pending W's (FIFO over B's done); leftovers at the end."""
    res = dict(slots)
    end = max(slots) + 1
    q0, q1, q = [], [], []
    started = False
    for s in range(end):
        if s in slots:
            typ, k = slots[s]
            started = True
            if typ == BU:
                (q0 if split else q).append((W0, k))
            elif typ == BD:
                (q1 if split else q).append((W1, k))
        elif started:
            if split:
                if q0:
                    res[s] = q0.pop(0)
                elif q1:
                    res[s] = q1.pop(0)
            elif q:
                res[s] = q.pop(0)
    for x in (q0 + q1 if split else q):
        res[end] = x
        end += 1
    return res


def strip_w(slots):
    return {s: x for s, x in slots.items() if x[0] not in (W0, W1)}


def peak_of(slots, with_w):
    """Peak in chunk activations: F +1, W -1; without W's they are placed by put_w first."""
    full = slots if with_w else put_w(slots, split=False)
    mem = best = 0
    for s in sorted(full):
        typ = full[s][0]
        if typ in (F0, F1):
            mem += 1
            best = max(best, mem)
        elif typ in (W0, W1):
            mem -= 1
    return best


def deps(p, i, typ, k):
    """(worker, type, mb) this node waits for."""
    out = []
    if k > 0:
        out.append((i, typ, k - 1))
    if typ == F0:
        if i > 0:
            out.append((i - 1, F0, k))
    elif typ == F1:
        out.append((i + 1, F1, k) if i < p - 1 else (i, F0, k))
    elif typ == BD:
        out.append((i - 1, BD, k) if i > 0 else (i, F1, k))
    elif typ == BU:
        out.append((i + 1, BU, k) if i < p - 1 else (i, BD, k))
    elif typ == W1:
        out.append((i, BD, k))
    elif typ == W0:
        out.append((i, BU, k))
    return out


def reorder(p, sched, consider_w):
    """One reorder pass (see the module doc). sched: per worker dict slot -> (type, mb)."""
    sched = [dict(s) for s in sched]
    where = {}
    for i, s in enumerate(sched):
        for slot, (typ, k) in s.items():
            where[(i, typ, k)] = slot
    with_w = consider_w
    target = max(peak_of(s, with_w) for s in sched)
    w0 = sched[0]
    first_bu = min(s for s, (t, _) in w0.items() if t == BU)
    last_f0 = max(s for s, (t, _) in w0.items() if t == F0)
    order = sorted(((slot, i) for i, s in enumerate(sched) for slot in s))
    for slot, i in order:
        typ, k = sched[i][slot]
        phase = 0 if slot < first_bu else (1 if slot <= last_f0 else 2)
        if phase == 1 or (phase == 0 and not consider_w):
            continue
        lo = 1 + max((where[d] for d in deps(p, i, typ, k) if d in where), default=-1)
        for t in range(lo, slot):
            if t in sched[i]:
                continue
            trial = dict(sched[i])
            del trial[slot]
            trial[t] = (typ, k)
            if peak_of(trial, with_w) <= target:
                sched[i] = trial
                where[(i, typ, k)] = t
            break  # only the earliest free slot is tried
    return sched


def eager_time(p, sched, f, b, w, c):
    """ASAP timing of each worker's slot-ordered list with real per-chunk costs and comm."""
    lists = [[sched[i][s] for s in sorted(sched[i])] for i in range(p)]
    cost = {F0: f, F1: f, BD: b, BU: b, W0: w, W1: w}
    end = {}
    head = [0] * p
    clock = [0.0] * p
    first = [None] * p
    progress = True
    while progress:
        progress = False
        for i in range(p):
            while head[i] < len(lists[i]):
                typ, k = lists[i][head[i]]
                ready = 0.0
                ok = True
                for d in deps(p, i, typ, k):
                    if d[1] == typ and d[0] == i:
                        continue  # same-type order on the worker is the list order
                    if d not in end:
                        ok = False
                        break
                    ready = max(ready, end[d] + (c if d[0] != i else 0.0))
                if not ok:
                    break
                start = max(clock[i], ready)
                if first[i] is None:
                    first[i] = start
                clock[i] = start + cost[typ]
                end[(i, typ, k)] = clock[i]
                head[i] += 1
                progress = True
    assert all(head[i] == len(lists[i]) for i in range(p)), "deadlock in eager timing"
    span = max(clock[i] - first[i] for i in range(p))
    return span


def authors(kind, p, m):
    """The final per-worker order (slot dicts) of the authors' construction (costs not used)."""
    base = pattern(kind, p, m)
    r1 = reorder(p, [put_w(s, split=False) for s in base], consider_w=True)
    r2 = reorder(p, [strip_w(s) for s in r1], consider_w=False)
    return [put_w(strip_w(s), split=True) for s in r2]


def metrics(p, m, sched, F, B, W, c):
    f, b, w = F / 2, B / 2, W / 2  # a chunk is half of a worker's layers
    span = eager_time(p, sched, f, b, w, c)
    bubble = 1 - m * (F + B + W) / span
    peak = max(peak_of(s, True) for s in sched) / 2
    return bubble, peak


GRID_P = [2, 3, 4, 6, 8, 12, 16]
COSTS = [(1, 1, 1, 0), (1, 2, 1, 0), (1, 1.5, 0.5, 0), (1, 2, 1, 0.2)]


def grid():
    for p in GRID_P:
        for m in sorted({p, 2 * p, 4 * p}):
            yield p, m


def main():
    compare = "--compare" in sys.argv
    ours = {}
    if compare:
        binary = sys.argv[sys.argv.index("--compare") + 1]
        out = subprocess.run([binary, "reference-grid"], check=True, capture_output=True,
                             text=True).stdout
        for line in out.split("\n"):
            x = line.split()
            if len(x) == 9:
                ours[(x[0], int(x[1]), int(x[2]), float(x[3]), float(x[4]), float(x[5]),
                      float(x[6]))] = (float(x[7]), float(x[8]))
    bad = 0
    print("%-6s %3s %4s %-14s | %-16s | %-16s" % ("sched", "p", "m", "F:B:W comm",
                                                  "authors bub/peak", "pipetrain bub/peak"))
    for p, m in grid():
        orders = {kind: authors(kind, p, m) for kind in ("v-min", "v-half")}
        for F, B, W, c in COSTS:
            for kind, sched in orders.items():
                bub, peak = metrics(p, m, sched, F, B, W, c)
                line = "%-6s %3d %4d %-14s | %.4f %4.1f" % (kind, p, m, "%g:%g:%g %g" % (F, B, W, c),
                                                           bub, peak)
                key = (kind, p, m, float(F), float(B), float(W), float(c))
                if compare:
                    ob, op = ours[key]
                    worse = ob > bub + 1e-6 or op > peak + 1e-9
                    bad += worse
                    line += "      | %.4f %4.1f%s" % (ob, op, "  WORSE" if worse else "")
                print(line, flush=True)
    if compare:
        print("cases where pipetrain is worse (bubble, or peak above the authors'):", bad)
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
