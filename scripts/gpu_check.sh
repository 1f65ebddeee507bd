#!/usr/bin/env bash
# The GPU check: everything pipetrain needs a GPU to verify, in one run on a lent GPU machine,
# ending in one summary table (also written to $OUT/gpu_check.md when $OUT is set). Steps:
#   1. every CUDA and NCCL test (kernels_cuda_test, cuda_smoke_test, nccl_transport_test);
#   2. the default job (small GPT, 2-digit addition) with --device cuda: 2 and 4 ranks on one
#      GPU (TCP between ranks, tensors staged through host memory; plan files never pick NCCL,
#      step 7 runs it); each compared with the same job on the CPU (whose
#      bf16 is the GPU's twin: GEMM inputs rounded to bf16, fp32 sums, bf16 stash): losses within
#      2e-3 relative in fp32 and 2e-2 in bf16 (same math, different summation orders, which in
#      bf16 can flip a rounding); measured activation bytes equal to the plan's prediction;
#   3. throughput of a 350M-parameter GPT (24 layers, hidden 1024, seq 1024) in bf16: one rank
#      holding the whole model, then 4 ranks sharing the GPU with 1f1b and v-half, each with and
#      without full offload, and v-min and v-zb without: tokens/s, model TFLOP/s (6 x parameters
#      x tokens plus attention, per second) and MFU against the device's dense bf16 peak;
#   4. where that model's step time goes: every op of a step timed alone (cuda_ops_bench), its
#      table appended to the summary;
#   5. the service path: `pipetrain local` (a coordinator and two worker daemons, --device auto)
#      runs a bf16 CUDA job; the workers register their GPU, the coordinator plans with its
#      published peak, and the job summary (MFU, activation and allocator peaks) is appended;
#   6. data parallelism on the GPU: 2 replicas of a 2-rank pipeline (4 ranks, staged TCP) must
#      give bitwise the losses of the one pipeline on the whole batch, in fp32 and bf16;
#   7. NCCL on one GPU: a coordinator and worker daemons that each pass for a host of their own
#      (--host, NCCL_HOSTID) run 1 x 2 (1f1b), 2 x 2 (1f1b) and 2 x 4 (v-half) jobs over NCCL
#      (a communicator per replica's pipeline and per stage group), and a 2 x 2 job whose
#      replica-1 worker is killed (kill -9) after step 3 and which resumes from its checkpoint on
#      the spare worker; each must give bitwise the losses of the same job, uninterrupted, on
#      workers sharing one label (TCP).
# GPU_CHECK_STEPS (default "1 2 3 4 5 6 7") runs a subset, e.g. "1 5" after a fix.
# Binaries come from gpu-bundle/ (scripts/gpu_bundle.sh, made on a machine with the build
# dependencies: the GPU machines reach no package registry), else from a CUDA build in build/.
# Budget: under 8 minutes on one H100/H200; every job runs under a deadline (JOB_TIMEOUT seconds,
# BIG_JOB_TIMEOUT for step 3) so one hang costs one row, not the lease.
# What comes back: $OUT/gpu_check.md (the table) and $OUT/logs.tar.gz (every log), refreshed after
# each row so a run stopped at its limit still returns what it did.
# GPU_CHECK_REHEARSAL=1 runs step 2 on a machine without a GPU (the "GPU" runs on the CPU) to
# check the script's own plumbing before spending device time.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/gpu-check-out}
mkdir -p "$out"
work=$(mktemp -d)
logs=$work/logs
mkdir -p "$logs"
rehearsal=${GPU_CHECK_REHEARSAL:-0}
job_timeout=${JOB_TIMEOUT:-120}
steps=" ${GPU_CHECK_STEPS:-1 2 3 4 5 6 7} "
runs() { [[ "$steps" == *" $1 "* ]]; }
big_job_timeout=${BIG_JOB_TIMEOUT:-60}
if [ "$rehearsal" = 1 ]; then
  bin=$work/bin
  mkdir -p "$bin"
  cp build/worker/pipetrain-worker build/client/pipetrain build/coordinator/pipetrain-coordinator \
    build/worker/pipetrain-generate "$bin/"
elif [ -f gpu-bundle/bundle.tar.xz ]; then
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
  for t in pipetrain-worker pipetrain pipetrain-coordinator pipetrain-generate kernels_cuda_test \
           cuda_smoke_test nccl_transport_test cuda_ops_bench; do
    cp "$(find build -type f -name "$t" -perm -u+x | head -1)" "$bin/"
  done
fi
# The CUDA libraries come from the GPU machine; where its loader does not know one (NCCL, say,
# shipped only inside a Python wheel there), find it and add its folder.
missing=$(ldd "$bin/pipetrain-worker" 2>/dev/null | awk '/not found/{print $1}' | sort -u)
for lib in $missing; do
  found=$(find /usr/local /opt /usr/lib -name "$lib" 2>/dev/null | head -1)
  [ -n "$found" ] && export LD_LIBRARY_PATH="$(dirname "$found"):$LD_LIBRARY_PATH"
done
summary="$out/gpu_check.md"
{
  echo "# GPU check, $(date -u +%Y-%m-%d)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null |
    sed 's/^/- /'
  [ -n "$missing" ] && echo "- libraries found outside the loader's path: $missing"
  ldd "$bin/pipetrain-worker" | awk '/not found/{print "- still missing: " $1}'
  echo
  echo "| check | result |"
  echo "|---|---|"
} >"$summary"
save_logs() { tar -C "$work" -czf "$out/logs.tar.gz" logs $(cd "$work" && ls *.out *.err *.log 2>/dev/null); }
row() { echo "| $1 | $2 |" | tee -a "$summary"; save_logs; }
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
gpu_device=cuda:0
gpu_kind=DEVICE_KIND_CUDA
if [ "$rehearsal" = 1 ]; then gpu_device=cpu; gpu_kind=; fi

# ---- 1. CUDA and NCCL tests
for t in kernels_cuda_test cuda_smoke_test nccl_transport_test; do
  { [ "$rehearsal" = 1 ] || ! runs 1; } && break
  timeout 180 "$bin/$t" >"$logs/$t.log" 2>&1
  rc=$?
  passed=$(grep -c '^\[       OK \]' "$logs/$t.log")
  failed=$(grep '^\[  FAILED  \] .*(' "$logs/$t.log" | sed 's/^\[  FAILED  \] //; s/ (.*//' | tr '\n' ' ')
  skipped=$(grep -c '^\[  SKIPPED \] .*(' "$logs/$t.log")
  row "$t" "rc $rc, $passed passed, $skipped skipped, failed: ${failed:-none}"
done

# ---- 2. the default job on the GPU against the CPU
job_file() {  # name workers schedule precision [device kind; none: any worker]
  local device=${5:+", \"device\": \"$5\""}
  cat >"$work/$1.json" <<EOF
{"name": "$1", "model": {"num_layers": 8, "hidden": 64, "num_heads": 4},
 "training": {"steps": 20, "global_batch": 64, "microbatch_size": 16, "seed": 1234,
              "optimizer": {"learning_rate": 0.003, "weight_decay": 0.01}},
 "parallelism": {"num_workers": $2, "schedule": "$3", "analytic_costs": true},
 "compute": {"precision": "$4"$device}}
EOF
}
run_job() {  # name workers timeout device... (one --device per rank) -> $work/<name>.r<rank>.out
  local name=$1 p=$2 limit=$3
  shift 3
  local port=$((29600 + RANDOM % 2000))
  "$bin/pipetrain" plan --job "$work/$name.json" --base-port "$port" --job-id "$name" \
    -o "$work/$name.plan" >"$work/$name.plan.log" 2>&1 || { cat "$work/$name.plan.log"; return 1; }
  local pids=() extra=()
  [ -n "${trace_jobs:-}" ] && extra=(--trace-dir "$logs/trace-$name")
  for ((r = 0; r < p; r++)); do
    timeout "$limit" "$bin/pipetrain-worker" --plan "$work/$name.plan" --rank "$r" --device "$1" \
      --connect-timeout 60 --recv-timeout 120 --report "$work/$name.r$r.json" "${extra[@]}" \
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
  runs 2 || break
  for prec in FP32 BF16; do
    # The reference names no device kind, so the CPU computes it (in bf16 as the GPU's twin).
    job_file "cpu$p$prec" "$p" 1f1b "PRECISION_$prec"
    run_job "cpu$p$prec" "$p" "$job_timeout" cpu || row "CPU reference, $p ranks, $prec" "failed (see $out)"
    name="gpu$p$prec"
    job_file "$name" "$p" 1f1b "PRECISION_$prec" "$gpu_kind"
    tol=$([ $prec = FP32 ] && echo 2e-3 || echo 2e-2)
    if run_job "$name" "$p" "$job_timeout" "$gpu_device"; then
      row "$p ranks on one GPU, $prec, TCP staged: losses vs CPU" "$(compare "cpu$p$prec" "$name" "$tol")"
      row "$p ranks on one GPU, $prec: activation bytes" "$(peaks_match "$name")"
    else
      row "$p ranks on one GPU, $prec" "failed: $(tail -1 "$work/$name".r*.err | head -3 | tr '\n' ' ')"
    fi
  done
done
# ---- 5. the service path: coordinator and worker daemons (before 3 and 4: it is quick)
if runs 5; then
  job_file localgpu 2 1f1b PRECISION_BF16 "$gpu_kind"
  timeout "$job_timeout" "$bin/pipetrain" local --job "$work/localgpu.json" --steps 10 \
    --no-progress --dir "$work/local" >"$work/localgpu.out" 2>&1
  rc=$?
  row "pipetrain local: coordinator + 2 worker daemons, bf16 job" \
    "rc $rc: $(grep -m1 -o 'SUCCEEDED\|FAILED.*\|CANCELLED' "$work/localgpu.out" || echo 'no verdict')"
  { echo; echo '```'; sed -n '/^job-/,/^loss:/p' "$work/localgpu.out"; echo '```'; } >>"$summary"
  cp -r "$work/local" "$logs/local" 2>/dev/null
fi

# ---- 6. data parallelism: d = 2 replicas of p = 2 against d = 1, bit for bit
if runs 6; then
  for prec in FP32 BF16; do
    job_file "dp1$prec" 2 1f1b "PRECISION_$prec" "$gpu_kind"
    job_file "dp2$prec" 2 1f1b "PRECISION_$prec" "$gpu_kind"
    sed -i 's/"num_workers": 2,/"num_workers": 2, "data_parallel": 2,/' "$work/dp2$prec.json"
    if run_job "dp1$prec" 2 "$job_timeout" "$gpu_device" &&
       run_job "dp2$prec" 4 "$job_timeout" "$gpu_device"; then
      row "data parallel 2 x 2 ranks on one GPU, $prec: losses vs 1 x 2" \
        "$(compare "dp1$prec" "dp2$prec" 0)"
    else
      row "data parallel 2 x 2 ranks on one GPU, $prec" \
        "failed: $(tail -qn1 "$work"/dp?"$prec".r*.err | grep -v '^I' | head -2 | tr '\n' ' ')"
    fi
  done
fi

# ---- 7. NCCL between ranks on one GPU: every worker a "host" of its own
# NCCL refuses two ranks of a communicator on one device of one host, and a lent machine has one
# GPU. Each worker daemon here reports a host label of its own (--host) and gives NCCL a host id
# of its own (NCCL_HOSTID), so the coordinator picks NCCL and NCCL links the ranks over its
# socket transport on the loopback, as between machines. The same jobs then run on workers that
# share one label (TCP, staged through host memory): the transport only moves bytes, so the
# losses must be equal bit for bit.
cluster_up() {  # dir distinct(0|1) workers: a coordinator and worker daemons -> $cl_addr, $cl_pids
  local dir=$1 distinct=$2 n=$3 port=$((31600 + RANDOM % 2000)) label
  mkdir -p "$dir"
  "$bin/pipetrain-coordinator" --listen "127.0.0.1:$port" --metrics-listen 127.0.0.1:0 \
    --db "$dir/jobs.db" >"$dir/coordinator.log" 2>&1 &
  cl_pids=($!)
  cl_addr=127.0.0.1:$port
  for ((i = 0; i < 300; i++)); do
    grep -q 'listening on' "$dir/coordinator.log" 2>/dev/null && break
    sleep 0.1
  done
  for ((i = 0; i < n; i++)); do
    label=gpubox
    [ "$distinct" = 1 ] && label=gpubox-$i
    NCCL_HOSTID=$label NCCL_SOCKET_IFNAME=lo NCCL_DEBUG=INFO timeout "$((3 * job_timeout))" \
      "$bin/pipetrain-worker" --coordinator "$cl_addr" --name "w$i" --host "$label" \
      --device "$gpu_device" --metrics-listen 127.0.0.1:0 --connect-timeout 60 \
      --recv-timeout 120 >"$dir/worker-$i.log" 2>&1 &
    cl_pids+=($!)
  done
}
cluster_down() { kill "${cl_pids[@]}" 2>/dev/null; wait "${cl_pids[@]}" 2>/dev/null; }
submit_losses() {  # dir job -> $dir/<job>.losses: the state, then every step's loss (%.17g)
  timeout "$job_timeout" "$bin/pipetrain" submit "$work/$2.json" --coordinator "$cl_addr" \
    --watch --json >"$1/$2.jsonl" 2>"$1/$2.err"
  python3 - "$1/$2.jsonl" >"$1/$2.losses" 2>"$1/$2.recoveries" <<'PY'
import json, sys
lines = [l for l in open(sys.argv[1]) if l.strip()]
job = json.loads(lines[-1]) if lines else {}
print(job.get("state", "no final record"))
for loss in job.get("losses", []):
    print("%.17g" % loss)
print(len(job.get("recoveries", [])), "recoveries,", job.get("transport", "no transport"),
      file=sys.stderr)
PY
}
kill_replica_worker() {  # dir job: after step 3, kill -9 the worker of replica 1, pipeline rank 1
  local id="" victim="" i
  for ((i = 0; i < 600; i++)); do
    id=$(grep -o 'job-[0-9]*' "$1/$2.err" 2>/dev/null | head -1)
    [ -n "$id" ] && victim=$("$bin/pipetrain" status "$id" --coordinator "$cl_addr" --json 2>/dev/null |
      python3 -c 'import json,sys; j=json.load(sys.stdin); w=j.get("worker_ids",[])
print(w[3] if j.get("steps_done",0) >= 3 and len(w) == 4 else "")')
    [ -n "$victim" ] && break
    sleep 0.1
  done
  # The worker's name is w<i>: cl_pids[i + 1] (cl_pids[0] is the coordinator).
  i=$("$bin/pipetrain" workers --coordinator "$cl_addr" --json | python3 -c '
import json, sys; print([w["name"] for w in json.load(sys.stdin)["workers"] if w["id"] == sys.argv[1]][0][1:])' "$victim")
  echo "killed $victim (w$i) of $id after step 3" >"$1/$2.killed"
  # (cl_pids holds the `timeout` wrappers: kill the worker under it.)
  pkill -9 -P "${cl_pids[$((i + 1))]}"
}
if runs 7; then
  job_file ncclp 2 1f1b PRECISION_FP32 "$gpu_kind"
  job_file nccldp 2 1f1b PRECISION_FP32 "$gpu_kind"
  job_file ncclv 4 v-half PRECISION_FP32 "$gpu_kind"
  job_file ncclkill 2 1f1b PRECISION_FP32 "$gpu_kind"
  sed -i 's/"num_workers": \([24]\),/"num_workers": \1, "data_parallel": 2,/' \
    "$work/nccldp.json" "$work/ncclv.json" "$work/ncclkill.json"
  sed -i 's/"steps": 20,/"steps": 6,/' "$work/ncclp.json" "$work/nccldp.json" "$work/ncclv.json"
  sed -i 's/"steps": 20,/"steps": 40,/' "$work/ncclkill.json"
  mv "$work/ncclkill.json" "$work/ncclkill.tmpl"
  for side in nccl tcp; do
    dir=$work/cluster-$side
    # 8 for the 2 x 4 job, and a spare for the recovery.
    cluster_up "$dir" "$([ $side = nccl ] && echo 1 || echo 0)" 9
    for j in ncclp nccldp ncclv; do submit_losses "$dir" "$j"; done
    sed "s|\"compute\":|\"checkpoint\": {\"dir\": \"$dir/ckpt\", \"interval_steps\": 2, \"keep_last\": 100},\n \"compute\":|" \
      "$work/ncclkill.tmpl" >"$work/ncclkill.json"
    if [ $side = nccl ]; then
      submit_losses "$dir" ncclkill &
      kill_replica_worker "$dir" ncclkill
      wait $!
    else
      submit_losses "$dir" ncclkill
    fi
    cluster_down
    mkdir -p "$logs/cluster-$side"
    cp "$dir"/*.log "$dir"/*.err "$dir"/*.jsonl "$dir"/*.losses "$logs/cluster-$side/" 2>/dev/null
  done
  inits=$(cat "$work"/cluster-nccl/worker-*.log | grep -c 'Init COMPLETE')
  want_nccl=TRANSPORT_KIND_NCCL
  [ "$rehearsal" = 1 ] && want_nccl=TRANSPORT_KIND_TCP  # CPU workers: no NCCL to pick
  for j in ncclp nccldp ncclv ncclkill; do
    case $j in
      ncclp) what="1 x 2, 1f1b" ;;
      nccldp) what="2 x 2, 1f1b (data parallel)" ;;
      ncclv) what="2 x 4, v-half (data parallel)" ;;
      ncclkill) what="2 x 2, $(cat "$work/cluster-nccl/ncclkill.killed" 2>/dev/null), $(cat "$work/cluster-nccl/ncclkill.recoveries" 2>/dev/null)" ;;
    esac
    a=$work/cluster-nccl/$j.losses b=$work/cluster-tcp/$j.losses
    if [ "$(head -1 "$a")" != JOB_STATE_SUCCEEDED ] || [ "$(head -1 "$b")" != JOB_STATE_SUCCEEDED ]; then
      row "NCCL on one GPU, $what" "failed: NCCL $(head -1 "$a"), TCP $(head -1 "$b"): $(tail -qn2 "$work"/cluster-*/$j.err | tr '\n' ' ')"
    elif ! grep -q "$want_nccl" "$work/cluster-nccl/$j.recoveries" ||
         ! grep -q TRANSPORT_KIND_TCP "$work/cluster-tcp/$j.recoveries"; then
      row "NCCL on one GPU, $what" "WRONG TRANSPORT: $(cat "$work"/cluster-{nccl,tcp}/$j.recoveries | tr '\n' ' ')"
    elif [ $j = ncclkill ] && ! grep -q '^[1-9]' "$work/cluster-nccl/ncclkill.recoveries"; then
      row "NCCL on one GPU, $what" "NOT INTERRUPTED: the job ended before the kill took effect"
    elif cmp -s "$a" "$b"; then
      row "NCCL on one GPU, $what, fp32: losses vs TCP" "$(($(wc -l <"$a") - 1)) steps bitwise equal (last $(tail -1 "$a")); the job records say ${want_nccl#TRANSPORT_KIND_} and TCP"
    else
      row "NCCL on one GPU, $what, fp32: losses vs TCP" "DIFFER: $(paste -d' ' "$a" "$b" | tail -1)"
    fi
  done
  row "NCCL communicators initialized (NCCL_DEBUG lines)" "$inits"
fi

# ---- 3. throughput of a 350M GPT in bf16
if [ "$rehearsal" = 1 ]; then echo; cat "$summary"; exit 0; fi
if runs 3; then
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
act_peak() {  # run -> the largest measured activation peak of any rank
  awk '$1 == "rank" && $10 > m {m = $10} END {printf "activation peak %.0f MiB", m / 1048576}' \
    "$work/$1".r*.out
}
trace_jobs=1  # a Chrome trace of every step of every rank, in logs.tar.gz
for cfg in "one 1 1f1b OFFLOAD_POLICY_NONE" "f1b 4 1f1b OFFLOAD_POLICY_NONE" \
           "f1bo 4 1f1b OFFLOAD_POLICY_FULL" "vhalf 4 v-half OFFLOAD_POLICY_NONE" \
           "vhalfo 4 v-half OFFLOAD_POLICY_FULL" "vmin 4 v-min OFFLOAD_POLICY_NONE" \
           "vzb 4 v-zb OFFLOAD_POLICY_NONE"; do
  set -- $cfg
  big_job "big$1" "$2" "$3" "$4"
  if run_job "big$1" "$2" "$big_job_timeout" cuda:0; then
    row "350M bf16, $2 rank(s), $3, $4" "$(throughput "big$1"); $(act_peak "big$1")"
  else
    row "350M bf16, $2 rank(s), $3, $4" "failed: $(tail -1 "$work/big$1".r*.err | head -2 | tr '\n' ' ')"
  fi
done
fi

# ---- 4. the 350M step's ops, one at a time
runs 4 && {
  echo
  timeout 120 "$bin/cuda_ops_bench" --layers 24 --hidden 1024 --heads 16 --seq 1024 --micro 4 \
    --microbatches 8 --vocab 50304 --precision bf16 2>&1 || echo "cuda_ops_bench failed: rc $?"
} >>"$summary"
save_logs
echo
cat "$summary"
