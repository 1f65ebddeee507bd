#!/usr/bin/env python3
"""The numpy check of an exported model (docs/export.md).

Runs the C++ fixture (export_fixture OUT_DIR), which trains a small GPT, exports it with
`pipetrain export`'s gathering and writes batches with pipetrain's loss on each. Then reads the
exported file with Hugging Face's `safetensors` package, runs the whole model's forward pass on
every batch with numpy alone (float64), and requires the same mean cross-entropy within 1e-4
relative. Only the file's metadata and tensor names are used to build the model, so this is
what any consumer of the export would do.

Usage: numpy_forward_check.py --fixture PATH --dir DIR
       numpy_forward_check.py --model FILE.safetensors --batches BATCHES.json
The second form checks a file exported elsewhere (tests/e2e's prepare -> train -> export chain)
against the batches and losses the caller wrote in the fixture's batches.json format. A model
with tie_word_embeddings has no lm_head.weight: its head is wte, as in GPT-2.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file

TOLERANCE = 1e-4  # relative; pipetrain computes in float32, this in float64


def layer_norm(x, gain, shift, eps):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gain + shift


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def forward_logits(w, cfg, tokens):
    """tokens [B, T] -> logits [B, T, V] of a GPT-2 (pre-LayerNorm) model."""
    b, t = tokens.shape
    n_embd, n_head = cfg["n_embd"], cfg["n_head"]
    head_dim = n_embd // n_head
    eps = cfg["layer_norm_epsilon"]
    x = w["wte.weight"][tokens] + w["wpe.weight"][:t][None, :, :]
    causal = np.tril(np.ones((t, t), dtype=bool))
    for i in range(cfg["n_layer"]):
        p = f"h.{i}."
        h = layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]  # [B, T, 3H]
        q, k, v = np.split(qkv, 3, axis=-1)
        q, k, v = (a.reshape(b, t, n_head, head_dim).transpose(0, 2, 1, 3) for a in (q, k, v))
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(head_dim)
        scores = np.where(causal, scores, -np.inf)
        scores = scores - scores.max(axis=-1, keepdims=True)
        probs = np.exp(scores)
        probs /= probs.sum(axis=-1, keepdims=True)
        att = (probs @ v).transpose(0, 2, 1, 3).reshape(b, t, n_embd)
        x = x + att @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        h = layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        m = gelu_tanh(h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
        x = x + m @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    x = layer_norm(x, w["ln_f.weight"], w["ln_f.bias"], eps)
    head = w["wte.weight"] if cfg["tie_word_embeddings"] else w["lm_head.weight"]
    return x @ head.T  # both are stored [vocab, hidden]


def mean_cross_entropy(logits, targets):
    """Mean over the positions whose target is not -1."""
    flat = logits.reshape(-1, logits.shape[-1])
    tgt = targets.reshape(-1)
    keep = tgt >= 0
    flat, tgt = flat[keep], tgt[keep]
    top = flat.max(axis=-1, keepdims=True)
    log_z = np.log(np.exp(flat - top).sum(axis=-1)) + top[:, 0]
    return float((log_z - flat[np.arange(len(tgt)), tgt]).mean())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixture", help="the export_fixture binary (with --dir)")
    parser.add_argument("--dir", help="a scratch directory for the fixture's files")
    parser.add_argument("--model", help="an exported .safetensors file (with --batches)")
    parser.add_argument("--batches", help="batches.json for --model")
    args = parser.parse_args()
    if args.fixture and args.dir and not (args.model or args.batches):
        os.makedirs(args.dir, exist_ok=True)
        subprocess.run([args.fixture, args.dir], check=True)
        path = os.path.join(args.dir, "model.safetensors")
        batches_path = os.path.join(args.dir, "batches.json")
    elif args.model and args.batches and not (args.fixture or args.dir):
        path, batches_path = args.model, args.batches
    else:
        parser.error("give either --fixture and --dir, or --model and --batches")

    with safe_open(path, framework="numpy") as f:
        meta = f.metadata()
    cfg = {k: int(meta[k]) for k in ("n_layer", "n_embd", "n_head", "n_inner", "n_positions",
                                     "vocab_size")}
    cfg["layer_norm_epsilon"] = float(meta["layer_norm_epsilon"])
    cfg["tie_word_embeddings"] = meta.get("tie_word_embeddings", "false") == "true"
    assert meta["activation_function"] == "gelu_new", meta
    weights = {name: t.astype(np.float64) for name, t in load_file(path).items()}
    for name, t in load_file(path).items():
        assert t.dtype == np.float32, (name, t.dtype)

    # The names and shapes a GPT-2 reader expects, and nothing else.
    h, f, v, n = cfg["n_embd"], cfg["n_inner"], cfg["vocab_size"], cfg["n_positions"]
    want = {"wte.weight": (v, h), "wpe.weight": (n, h), "ln_f.weight": (h,), "ln_f.bias": (h,)}
    if not cfg["tie_word_embeddings"]:
        want["lm_head.weight"] = (v, h)
    for i in range(cfg["n_layer"]):
        p = f"h.{i}."
        want.update({p + "ln_1.weight": (h,), p + "ln_1.bias": (h,),
                     p + "attn.c_attn.weight": (h, 3 * h), p + "attn.c_attn.bias": (3 * h,),
                     p + "attn.c_proj.weight": (h, h), p + "attn.c_proj.bias": (h,),
                     p + "ln_2.weight": (h,), p + "ln_2.bias": (h,),
                     p + "mlp.c_fc.weight": (h, f), p + "mlp.c_fc.bias": (f,),
                     p + "mlp.c_proj.weight": (f, h), p + "mlp.c_proj.bias": (h,)})
    got = {name: tuple(t.shape) for name, t in weights.items()}
    if got != want:
        print("tensor names or shapes differ from GPT-2's:", sorted(set(got.items()) ^ set(want.items())))
        return 1

    with open(batches_path) as fh:
        batches = json.load(fh)
    worst = 0.0
    for batch in batches:
        tokens = np.array(batch["tokens"], dtype=np.int64).reshape(batch["batch"], -1)
        targets = np.array(batch["targets"], dtype=np.int64).reshape(tokens.shape)
        ours = mean_cross_entropy(forward_logits(weights, cfg, tokens), targets)
        theirs = float(batch["loss"])
        rel = abs(ours - theirs) / abs(theirs)
        worst = max(worst, rel)
        print(f"{batch['name']}: pipetrain loss {theirs:.9f}, numpy loss {ours:.9f}, "
              f"relative difference {rel:.2e}")
        if not rel <= TOLERANCE:
            print(f"FAIL: the numpy forward pass differs by more than {TOLERANCE} relative")
            return 1
    print(f"OK: {len(batches)} batches within {TOLERANCE} relative (worst {worst:.2e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
