#!/usr/bin/env bash
# The benchmark suite, one command: builds the bench programs (Release, in $BUILD_DIR, default
# build-bench) and runs bench/suite's pipetrain_bench, which measures everything and writes
# docs/BENCHMARKS.md (its generated block) and docs/bench/*.svg.
#   scripts/bench.sh              full run (about 8-15 minutes on 2 cores; sampling alone ~3), into docs/
#   scripts/bench.sh --quick      smoke run (seconds), into $BUILD_DIR/bench-quick/
#   scripts/bench.sh --out DIR    write somewhere else; other flags go to pipetrain_bench
#                                 (--repeats N,
#                                 --sections gen,emulated,cpu,clip,frontier,offload,external,sampling)
# CMake flags for the configure step can be given in $BENCH_CMAKE_ARGS (e.g. the ccache launcher).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-bench}
out=docs
args=()
quick=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --quick) quick=1; args+=("$1"); shift ;;
    *) args+=("$1"); shift ;;
  esac
done
if [ "$quick" = 1 ] && [ "$out" = docs ]; then out="$BUILD_DIR/bench-quick"; fi
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  # shellcheck disable=SC2086
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release ${BENCH_CMAKE_ARGS:-}
fi
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target pipetrain_bench transport_bench kernels_bench blas_compare offload_curve
mkdir -p "$out"
"$BUILD_DIR/bench/suite/pipetrain_bench" --out "$out" \
  --transport-bench "$BUILD_DIR/bench/transport/transport_bench" \
  --kernels-bench "$BUILD_DIR/bench/kernels/kernels_bench" \
  --blas-compare "$BUILD_DIR/bench/kernels/blas_compare" \
  --offload-bench "$BUILD_DIR/bench/offload/offload_curve" \
  --command "$(echo "scripts/bench.sh ${args[*]:-}" | sed 's/ *$//')" "${args[@]}"
echo "wrote $out/BENCHMARKS.md and $out/bench/*.svg"
