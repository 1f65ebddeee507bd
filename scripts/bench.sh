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
# The candidate BLAS libraries blas_compare measures beside the installed OpenBLAS: Debian's
# packages, downloaded once and unpacked next to the build (never installed, so nothing the
# project links changes). Without apt (or offline) only the installed libraries are compared.
blas_root="$BUILD_DIR/blas-candidates"
if [ "$quick" = 0 ] && [ ! -d "$blas_root/usr" ] && command -v apt-get >/dev/null; then
  mkdir -p "$blas_root/debs"
  if (cd "$blas_root/debs" && apt-get download -q libopenblas0-openmp libopenblas0-serial \
        libblis4-pthread libblis4-openmp libblis4-serial libdnnl2 ocl-icd-libopencl1 2>/dev/null); then
    for deb in "$blas_root"/debs/*.deb; do dpkg-deb -x "$deb" "$blas_root"; done
  else
    echo "bench: could not download the candidate BLAS packages; comparing the installed ones only" >&2
  fi
fi
mkdir -p "$out"
"$BUILD_DIR/bench/suite/pipetrain_bench" --out "$out" \
  --transport-bench "$BUILD_DIR/bench/transport/transport_bench" \
  --kernels-bench "$BUILD_DIR/bench/kernels/kernels_bench" \
  --blas-compare "$BUILD_DIR/bench/kernels/blas_compare" --blas-root "$blas_root" \
  --offload-bench "$BUILD_DIR/bench/offload/offload_curve" \
  --command "$(echo "scripts/bench.sh ${args[*]:-}" | sed 's/ *$//')" "${args[@]}"
echo "wrote $out/BENCHMARKS.md and $out/bench/*.svg"
