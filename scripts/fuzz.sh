#!/usr/bin/env bash
# Coverage-guided fuzzing of JobSpec validation and planning (libFuzzer + AddressSanitizer):
# builds tests/fuzz/job_spec_fuzzer with clang++ into build-fuzz/ and runs it for a bounded time
# from the seeds in tests/fuzz/seeds/ (text protos, encoded with protoc). A broken contract or a
# crash fails the script and prints the input that did it; the input stays in
# build-fuzz/fuzz-crashes/ (rerun it: build-fuzz/tests/fuzz/job_spec_fuzzer FILE).
#
# Usage: scripts/fuzz.sh [SECONDS]   (default: $PIPETRAIN_FUZZ_SECONDS, else 60)
# Without clang++ or libFuzzer it says so and exits 0 (the g++ build fuzzes the same contract
# deterministically in ctest: coordinator_fuzz_test).
set -euo pipefail
cd "$(dirname "$0")/.."
budget=${1:-${PIPETRAIN_FUZZ_SECONDS:-60}}
build=${FUZZ_BUILD_DIR:-build-fuzz}
cxx=${FUZZ_CXX:-clang++}

probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' \
  > "$probe/probe.cc"
if ! command -v "$cxx" >/dev/null 2>&1 ||
   ! "$cxx" -fsanitize=fuzzer,address "$probe/probe.cc" -o "$probe/probe" 2>/dev/null; then
  echo "fuzz: skipped: $cxx with libFuzzer (-fsanitize=fuzzer) is not available"
  exit 0
fi

start=$(date +%s)
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" -DPIPETRAIN_FUZZ=ON \
    -DPIPETRAIN_ENABLE_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo ${FUZZ_CMAKE_ARGS:-} >/dev/null
fi
cmake --build "$build" -j "${JOBS:-$(nproc)}" --target job_spec_fuzzer
echo "fuzz: built in $(( $(date +%s) - start )) s"

corpus="$build/fuzz-corpus"
crashes="$build/fuzz-crashes"
mkdir -p "$corpus" "$crashes"
for seed in tests/fuzz/seeds/*.textproto; do
  protoc --encode=pipetrain.v1.JobSpec -I proto pipetrain/v1/job.proto \
    < "$seed" > "$corpus/seed-$(basename "$seed" .textproto)"
done

fuzzer="$build/tests/fuzz/job_spec_fuzzer"
echo "fuzz: $fuzzer for ${budget} s over $(ls "$corpus" | wc -l) corpus inputs"
if ! "$fuzzer" -max_total_time="$budget" -print_final_stats=1 -artifact_prefix="$crashes/" \
     -rss_limit_mb=4096 -timeout=10 "$corpus" 2> "$build/fuzz.log"; then
  tail -n 60 "$build/fuzz.log"
  for input in "$crashes"/*; do
    [ -f "$input" ] || continue
    echo "---- $input (hex):"
    od -A d -t x1 "$input" | head -n 20
  done
  echo "fuzz: FAILED (see above; inputs in $crashes/)"
  exit 1
fi
grep -E "^(stat::number_of_executed_units|stat::new_units_added|Done)" "$build/fuzz.log" || true
echo "fuzz: passed ($(( $(date +%s) - start )) s in all)"
