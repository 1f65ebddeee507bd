#!/usr/bin/env bash
# Data x pipeline parallelism at N workers on this machine, into docs/BENCHMARKS.md (between the
# DATA PARALLEL markers) and docs/bench/data_parallel_report.svg + data_parallel_trace.json: the
# planner's choice among every split, schedule and microbatch size with the workers sharing the
# cores, then every split x schedule run as a job on a local coordinator with N worker daemons,
# predicted next to measured (dp_bench.py says how), and the gradient sums in a report and a
# trace. About 5-10 minutes on 2 cores.
#   bench/data_parallel/bench.sh [BUILD_DIR] [N]      extra flags: BENCH_FLAGS="--steps 30"
# Needs a build with pipetrain, pipetrain-coordinator and pipetrain-worker (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
workers=${2:-4}
# shellcheck disable=SC2086
exec python3 bench/data_parallel/dp_bench.py --build "$build" --workers "$workers" \
  --command "bench/data_parallel/bench.sh $build $workers" ${BENCH_FLAGS:-}
