#!/usr/bin/env bash
# pipetrain vs PyTorch on the same GPT, side by side (issue 26): makes a venv with PyTorch from
# PyPI ($BUILD_DIR/peer-venv; the tests never need it), builds pipetrain_peer (Release, in
# $BUILD_DIR, default build-bench) and runs bench/peer/peer_bench.py, which writes its table into
# docs/BENCHMARKS.md between the PEER markers. Extra flags go to peer_bench.py (--rounds N,
# --steps N, --only LABEL-SUBSTRING, --doc PATH).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build-bench}
venv="$BUILD_DIR/peer-venv"
if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --progress-bar off torch numpy
fi
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  # shellcheck disable=SC2086
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release ${BENCH_CMAKE_ARGS:-}
fi
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target pipetrain_peer
python3 bench/peer/peer_bench.py --python "$venv/bin/python" \
  --pipetrain-peer "$BUILD_DIR/bench/peer/pipetrain_peer" \
  --command "$(echo "bench/peer/peer_bench.sh $*" | sed 's/ *$//')" "$@"
