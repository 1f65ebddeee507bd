#!/usr/bin/env bash
# The GPU check: everything pipetrain needs a GPU to verify, in one run on a lent GPU machine,
# ending in one summary table (also written to $OUT/gpu_check.md when $OUT is set). Steps:
#   1. every CUDA and NCCL test (kernels_cuda_test, cuda_smoke_test, nccl_transport_test);
#   2. the default job (small GPT, 2-digit addition) with --device cuda: 2 and 4 ranks on one
#      GPU (TCP between ranks, tensors staged through host memory), and one rank per GPU over
#      NCCL when there are at least 2 GPUs; each compared with the same job on the CPU (whose
#      bf16 is the GPU's twin: GEMM inputs rounded to bf16, fp32 sums, bf16 stash): losses within
#      2e-3 relative in fp32 and 2e-2 in bf16 (same math, different summation orders, which in
#      bf16 can flip a rounding); measured activation bytes equal to the plan's prediction;
#   3. throughput of a 350M-parameter GPT (24 layers, hidden 1024, seq 1024) in bf16: one rank
#      holding the whole model, then 4 ranks sharing the GPU with 1f1b and v-half, each with and
#      without offload: tokens/s, model TFLOP/s (6 x parameters x tokens plus attention, per
#      second) and MFU against the device's dense bf16 peak.
# Binaries come from gpu-bundle/ (scripts/gpu_bundle.sh, made on a machine with the build
# dependencies: the GPU machines reach no package registry), else from a CUDA build in build/.
# Budget: under 8 minutes on one H100/H200.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/gpu-check-out}
mkdir -p "$out"
work=$(mktemp -d)
if [ -f gpu-bundle/bundle.tar.xz ]; then
  tar -C "$work" -xJf gpu-bundle/bundle.tar.xz
  export LD_LIBRARY_PATH="$work/lib:${LD_LIBRARY_PATH:-}:/usr/local/cuda/lib64"
  # The binaries were built with GCC 12: use the bundled libstdc++ only where the machine's lacks
  # its symbols (that one needs glibc 2.36).
  sys_stdcxx=$(ldconfig -p | awk '/libstdc\+\+\.so\.6 .*x86-64/{print $NF; exit}')
  if [ -z "$sys_stdcxx" ] || ! grep -qa GLIBCXX_3.4.30 "$sys_stdcxx"; then
    export LD_LIBRARY_PATH="$work/lib-stdcxx:$LD_LIBRARY_PATH"
  fi
  bin=$work/bin
else
  scripts/build.sh -DCMAKE_CUDA_ARCHITECTURES=90 >"$out/build.log" 2>&1 || {
    echo "gpu_check: the CUDA build failed (build.log)"; exit 1; }
  bin=$work/bin
  mkdir -p "$bin"
  for t in pipetrain-worker pipetrain kernels_cuda_test cuda_smoke_test nccl_transport_test; do
    cp "$(find build -type f -name "$t" -perm -u+x | head -1)" "$bin/"
  done
fi
summary="$out/gpu_check.md"
{
  echo "# GPU check, $(date -u +%Y-%m-%d)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | sed 's/^/- /'
  echo
  echo "| check | result |"
  echo "|---|---|"
} >"$summary"
row() { echo "| $1 | $2 |" | tee -a "$summary"; }
gpus=$(nvidia-smi -L | wc -l)

# ---- 1. CUDA and NCCL tests
for t in kernels_cuda_test cuda_smoke_test nccl_transport_test; do
  "$bin/$t" --gtest_brief=1 >"$out/$t.log" 2>&1
  rc=$?
  passed=$(grep -c '^\[       OK \]' "$out/$t.log")
  failed=$(grep -c '^\[  FAILED  \] .*(' "$out/$t.log")
  row "$t" "rc $rc, $passed passed, $failed failed"
done

# ---- 2. the default job on the GPU against the CPU
job_file() {  # name workers schedule precision device
  cat >"$work/$1.json" <<EOF
{"name": "$1", "model": {"num_layers": 8, "hidden": 64, "num_heads": 4},
 "training": {"steps": 20, "global_batch": 64, "microbatch_size": 16, "seed": 1234,
              "optimizer": {"learning_rate": 0.003, "weight_decay": 0.01}},
 "parallelism": {"num_workers": $2, "schedule": "$3", "analytic_costs": true},
 "compute": {"precision": "$4", "device": "$5"}}
EOF
}
run_job() {  # name workers device... (one --device per rank) -> $work/<name>.r<rank>.out
  local name=$1 p=$2
  shift 2
  local port=$((29600 + RANDOM % 2000))
  "$bin/pipetrain" plan --job "$work/$name.json" --base-port "$port" --job-id "$name" \
    -o "$work/$name.plan" >"$work/$name.plan.log" 2>&1 || { cat "$work/$name.plan.log"; return 1; }
  local pids=()
  for ((r = 0; r < p; r++)); do
    "$bin/pipetrain-worker" --plan "$work/$name.plan" --rank "$r" --device "$1" \
      --connect-timeout 60 --recv-timeout 120 --report "$work/$name.r$r.json" \
      >"$work/$name.r$r.out" 2>"$work/$name.r$r.err" &
    pids+=($!)
    [ $# -gt 1 ] && shift
  done
  local ok=0
  for pid in "${pids[@]}"; do wait "$pid" || ok=1; done
  return $ok
}
losses() { grep -h '^rank' "$work/$1".r*.out | awk '$6 != "null" {print $4, $6}' | sort -n; }
compare() {  # cpu-run gpu-run tolerance -> "max rel diff D (ok|OVER)"
  join <(losses "$1") <(losses "$2") | awk -v tol="$3" '
    {d = ($2 - $3) / ($2 > 0 ? $2 : 1); if (d < 0) d = -d; if (d > m) m = d; n++}
    END {printf "%d steps, max rel diff %.2e %s", n, m, (n > 0 && m <= tol) ? "(ok)" : "(OVER)"}'
}
peaks_match() {  # run -> "measured == predicted" per rank, from the plan and the step lines
  python3 - "$work/$1.plan" "$work/$1" <<'EOF'
import glob, json, sys
plan = json.load(open(sys.argv[1]))["plan"]["prediction"]["peak_activation_bytes"]
bad = []
for r, want in enumerate(plan):
    for line in open(f"{sys.argv[2]}.r{r}.out"):
        f = line.split()
        if f and f[0] == "rank" and int(f[9]) != int(want):
            bad.append(f"rank {r} step {f[3]}: {f[9]} != {want}")
print("equal" if not bad else "; ".join(bad[:3]))
EOF
}
for p in 2 4; do
  for prec in FP32 BF16; do
    job_file "cpu$p$prec" "$p" 1f1b "PRECISION_$prec" DEVICE_KIND_CPU
    run_job "cpu$p$prec" "$p" cpu || row "CPU reference, $p ranks, $prec" "failed (see $out)"
    name="gpu$p$prec"
    job_file "$name" "$p" 1f1b "PRECISION_$prec" DEVICE_KIND_CUDA
    tol=$([ $prec = FP32 ] && echo 2e-3 || echo 2e-2)
    if run_job "$name" "$p" cuda:0; then
      row "$p ranks on one GPU, $prec, TCP staged: losses vs CPU" "$(compare "cpu$p$prec" "$name" "$tol")"
      row "$p ranks on one GPU, $prec: activation bytes" "$(peaks_match "$name")"
    else
      row "$p ranks on one GPU, $prec" "failed: $(tail -1 "$work/$name".r*.err | head -3 | tr '\n' ' ')"
    fi
  done
done
if [ "$gpus" -ge 2 ]; then
  job_file nccl2 2 1f1b PRECISION_FP32 DEVICE_KIND_CUDA
  if run_job nccl2 2 cuda:0 cuda:1; then
    row "2 ranks, one GPU each, NCCL: losses vs CPU" "$(compare cpu2FP32 nccl2 2e-3)"
  else
    row "2 ranks, one GPU each, NCCL" "failed: $(tail -1 "$work"/nccl2.r*.err | tr '\n' ' ')"
  fi
else
  row "NCCL, one rank per GPU" "not run: $gpus GPU"
fi

# ---- 3. throughput of a 350M GPT in bf16
head -c 16000000 /dev/urandom | base64 >"$work/corpus.txt"
big_job() {  # name workers schedule offload
  cat >"$work/$1.json" <<EOF
{"name": "$1", "model": {"num_layers": 24, "hidden": 1024, "num_heads": 16, "seq_len": 1024,
                         "vocab_size": 50304},
 "training": {"steps": 6, "global_batch": 32, "microbatch_size": 4, "seed": 1,
              "data": {"source": "text", "path": "$work/corpus.txt"}},
 "parallelism": {"num_workers": $2, "schedule": "$3", "analytic_costs": true},
 "memory": {"offload": "$4", "host_link_bytes_per_s": 2e10},
 "compute": {"precision": "PRECISION_BF16", "device": "DEVICE_KIND_CUDA"}}
EOF
}
# Dense bf16 peak of the device (H100 SXM and H200: 989 TFLOP/s).
peak_tflops=989
params=$((24 * 12 * 1024 * 1024 + 50304 * 1024 + 1024 * 1024))
flops_per_token=$((6 * params + 6 * 24 * 1024 * 1024 * 2))  # + attention scores (fwd+bwd)
throughput() {  # run -> tokens/s TFLOP/s MFU over the steps after the first
  awk -v fpt="$flops_per_token" -v peak="$peak_tflops" '$1 == "rank" && $4 > 0 {t += $8; n++}
    END {if (n == 0) {print "no steps"; exit}
         tps = 32 * 1024 / (t / n / 1000); tf = tps * fpt / 1e12;
         printf "%.0f tokens/s, %.1f TFLOP/s, MFU %.1f%%", tps, tf, 100 * tf / peak}' \
    "$work/$1.r0.out"
}
for cfg in "one 1 1f1b OFFLOAD_POLICY_NONE" "f1b 4 1f1b OFFLOAD_POLICY_NONE" \
           "f1bo 4 1f1b OFFLOAD_POLICY_FULL" "vhalf 4 v-half OFFLOAD_POLICY_NONE" \
           "vhalfo 4 v-half OFFLOAD_POLICY_FULL"; do
  set -- $cfg
  big_job "big$1" "$2" "$3" "$4"
  if run_job "big$1" "$2" cuda:0; then
    row "350M bf16, $2 rank(s), $3, $4" "$(throughput "big$1")"
  else
    row "350M bf16, $2 rank(s), $3, $4" "failed: $(tail -1 "$work/big$1".r*.err | head -2 | tr '\n' ' ')"
  fi
done
cp "$work"/*.err "$work"/*.log "$out"/ 2>/dev/null
echo
cat "$summary"
