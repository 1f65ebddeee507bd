#!/usr/bin/env bash
# Data parallelism at N workers on this machine: every split d x p = N of the default job (with
# the schedule given, default 1f1b) planned by `pipetrain plan --job --workers N` (the chosen
# split marked) and then measured: each split runs as d x p pipetrain-worker processes from a
# plan file on loopback, and the median step time of the steps after the first (the rank of
# replica 0 holding the last stage) is printed next to the plan's prediction.
#   bench/data_parallel/splits.sh [BUILD_DIR] [N] [SCHEDULE] [STEPS]
# Needs a build with pipetrain and pipetrain-worker (scripts/build.sh). Prints a table.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
workers=${2:-4}
schedule=${3:-1f1b}
steps=${4:-20}
cli=$build/client/pipetrain
worker=$build/worker/pipetrain-worker
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$cli" local --print-default-job > "$dir/default.yaml"
python3 - "$dir/default.yaml" "$schedule" "$steps" > "$dir/job.yaml" <<'PY'
import sys, re
text = open(sys.argv[1]).read()
text = re.sub(r'(\n  schedule: )"[^"]*"', r'\1"%s"' % sys.argv[2], text)
text = re.sub(r'(\n  steps: )\d+', r'\g<1>%s' % sys.argv[3], text)
print(text)
PY
echo "== pipetrain plan --job (default job, schedule $schedule) --workers $workers --explain"
"$cli" plan --job "$dir/job.yaml" --workers "$workers" --explain --format ascii -o "$dir/plan.txt" |
  sed -n '/^d   p/,/^chosen/p'
printf "\n%-3s %-3s %-10s %14s %14s\n" d p schedule "predicted s" "measured s"
for ((d = 1; d <= workers; d++)); do
  (( workers % d == 0 )) || continue
  p=$((workers / d))
  sed -e "s/^  num_workers: .*/  num_workers: $p/" -e "s/^  data_parallel: .*/  data_parallel: $d/" \
    "$dir/job.yaml" > "$dir/job-$d.yaml"
  base=$((30000 + 100 * d))
  if ! "$cli" plan --job "$dir/job-$d.yaml" --base-port "$base" --job-id "dp-bench-$d" \
      -o "$dir/job-$d.plan" > "$dir/plan-$d.out" 2>&1; then
    printf "%-3s %-3s %-10s %14s\n" "$d" "$p" "$schedule" "(no plan: $(tail -1 "$dir/plan-$d.out" | cut -c1-60))"
    continue
  fi
  predicted=$( (grep -o 'predicted step with them [0-9.]*' "$dir/plan-$d.out" || true) |
    awk '{print $5}')
  [ -n "$predicted" ] || predicted=$( (grep -o 'predicted step [0-9.]*' "$dir/plan-$d.out" || true) |
    head -1 | awk '{print $3}')
  pids=()
  for ((r = 0; r < d * p; r++)); do
    "$worker" --plan "$dir/job-$d.plan" --rank "$r" > "$dir/run-$d-$r.out" 2> "$dir/run-$d-$r.err" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
  measured=$(cat "$dir"/run-$d-*.out | awk '$6 != "null" && $4 > 0 {print $8}' | sort -n |
    awk '{a[NR] = $1} END {if (NR) print a[int((NR + 1) / 2)] / 1000}')
  printf "%-3s %-3s %-10s %14s %14s\n" "$d" "$p" "$schedule" "$predicted" "$measured"
done
