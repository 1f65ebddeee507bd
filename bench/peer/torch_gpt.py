"""PyTorch's side of the peer benchmark (issue 26): the same GPT as pipetrain's (pre-LN, tanh
GELU, fused QKV, causal attention, untied head without bias, learned positions, byte vocab),
trained with AdamW (lr 1e-3, no weight decay, no clipping) on random bytes, fp32, one intra-op
thread per process. Prints one JSON line: the fastest step of --steps after a warm-up step (the
slowest rank's, for pipelines) and the CPU seconds per step of all processes over the whole run
(model set-up and warm-up step included, as pipetrain_peer counts them).

  python torch_gpt.py --hidden 256 --schedule single
  python torch_gpt.py --hidden 256 --schedule 1f1b         # 2 ranks, torch.distributed.pipelining
  (schedules: single, 1f1b, interleaved-1f1b, zb-v, dualpipev)
"""
import argparse
import json
import os
import resource
import socket
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 256


class Embed(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, a.hidden)
        self.wpe = nn.Embedding(a.seq_len, a.hidden)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        return self.wte(idx) + self.wpe(pos)


class Block(nn.Module):
    def __init__(self, a):
        super().__init__()
        h = a.hidden
        self.heads = a.heads
        self.ln1 = nn.LayerNorm(h)
        self.qkv = nn.Linear(h, 3 * h)
        self.proj = nn.Linear(h, h)
        self.ln2 = nn.LayerNorm(h)
        self.fc = nn.Linear(h, 4 * h)
        self.fc2 = nn.Linear(4 * h, h)

    def forward(self, x):
        b, t, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(h, dim=2)
        hd = h // self.heads
        q, k, v = (z.view(b, t, self.heads, hd).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, h))
        return x + self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Head(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.ln_f = nn.LayerNorm(a.hidden)
        self.lm_head = nn.Linear(a.hidden, VOCAB, bias=False)

    def forward(self, x):
        return self.lm_head(self.ln_f(x))


def stage_modules(a, num_stages):
    """The model cut into num_stages sequential pieces of equal block counts."""
    torch.manual_seed(1234)
    per = a.layers // num_stages
    mods = []
    for s in range(num_stages):
        parts = [Embed(a)] if s == 0 else []
        parts += [Block(a) for _ in range(per)]
        if s == num_stages - 1:
            parts.append(Head(a))
        mods.append(nn.Sequential(*parts))
    return mods


def loss_fn(logits, targets):
    return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


def batch(a, step):
    g = torch.Generator().manual_seed(7919 * step + 1)
    n = a.microbatch_size * a.microbatches
    x = torch.randint(0, VOCAB, (n, a.seq_len), generator=g)
    return x, (x * 7 + 1) % VOCAB


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run_single(a):
    cpu0 = cpu_seconds()
    model = stage_modules(a, 1)[0]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    times = []
    for step in range(a.steps + 1):
        x, y = batch(a, step)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        for m in range(a.microbatches):
            sl = slice(m * a.microbatch_size, (m + 1) * a.microbatch_size)
            (loss_fn(model(x[sl]), y[sl]) / a.microbatches).backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    return {"step_s": min(times[1:]), "cpu_s_per_step": (cpu_seconds() - cpu0) / (a.steps + 1)}


def stage_indices(schedule, rank, world):
    if schedule == "1f1b":
        return [rank], world
    if schedule == "interleaved-1f1b":
        return [rank, rank + world], 2 * world
    if schedule in ("zb-v", "dualpipev"):
        return [rank, 2 * world - 1 - rank], 2 * world
    raise ValueError(f"--schedule: unknown {schedule!r}; allowed: single, 1f1b, "
                     "interleaved-1f1b, zb-v, dualpipev")


def rank_main(rank, a, port, out_path):
    import torch.distributed as dist
    from torch.distributed import pipelining as pp

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    cpu0 = cpu_seconds()
    indices, num_stages = stage_indices(a.schedule, rank, 2)
    mods = stage_modules(a, num_stages)
    stages = [pp.PipelineStage(mods[i], i, num_stages, torch.device("cpu")) for i in indices]
    params = [p for i in indices for p in mods[i].parameters()]
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.0)
    if a.schedule == "1f1b":
        sched = pp.Schedule1F1B(stages[0], n_microbatches=a.microbatches, loss_fn=loss_fn)
    elif a.schedule == "interleaved-1f1b":
        sched = pp.ScheduleInterleaved1F1B(stages, n_microbatches=a.microbatches, loss_fn=loss_fn)
    elif a.schedule == "dualpipev":
        sched = pp.ScheduleDualPipeV(stages, n_microbatches=a.microbatches, loss_fn=loss_fn)
    else:
        sched = pp.ScheduleZBVZeroBubble(stages, n_microbatches=a.microbatches, loss_fn=loss_fn)
    first, last = 0 in indices, num_stages - 1 in indices
    times = []
    for step in range(a.steps + 1):
        x, y = batch(a, step)
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        args = (x,) if first else ()
        kwargs = {"target": y} if last else {}
        sched.step(*args, **kwargs)
        opt.step()
        t = torch.tensor([time.perf_counter() - t0, 0.0], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        times.append(float(t[0]))
    cpu = torch.tensor([cpu_seconds() - cpu0], dtype=torch.float64)
    dist.all_reduce(cpu, op=dist.ReduceOp.SUM)
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump({"step_s": min(times[1:]),
                       "cpu_s_per_step": float(cpu[0]) / (a.steps + 1)}, f)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--microbatch-size", type=int, default=8)
    p.add_argument("--microbatches", type=int, default=8)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--schedule", default="single")
    a = p.parse_args()
    torch.set_num_threads(1)
    if a.schedule == "single":
        print(json.dumps(run_single(a)))
        return
    import tempfile
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "result.json")
        mp.spawn(rank_main, args=(a, port, out), nprocs=2, join=True)
        with open(out) as f:
            print(json.dumps(json.load(f)))


if __name__ == "__main__":
    main()
