#!/usr/bin/env bash
# The test command: installs dependencies, builds, runs every test with CTest, then fuzzes
# JobSpec validation and planning with libFuzzer on a fixed set of inputs, about a minute
# (scripts/fuzz.sh --fixed; skipped with a reason where clang's libFuzzer is missing).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" --timeout 600
scripts/fuzz.sh --fixed
