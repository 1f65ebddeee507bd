#!/usr/bin/env bash
# Coverage-guided fuzzing (libFuzzer + AddressSanitizer) with clang++ into build-fuzz/, for a
# bounded time, of two targets in tests/fuzz/:
#   job_spec_fuzzer  bytes as a binary JobSpec -> validation and planning (2/3 of the time),
#                    seeds: tests/fuzz/seeds/*.textproto, encoded with protoc;
#   job_file_fuzzer  text as a YAML and a JSON job file, as the client reads it (1/3),
#                    seeds: tests/fuzz/seeds_text/.
# Both use tests/fuzz/job_spec.dict. A broken contract or a crash fails the script and prints the
# input that did it (as text, and hex); the input stays in build-fuzz/fuzz-crashes/ (rerun it:
# build-fuzz/tests/fuzz/<target> FILE). The corpora grow in build-fuzz/fuzz-corpus*/.
#
# Usage: scripts/fuzz.sh [SECONDS]   (default: $PIPETRAIN_FUZZ_SECONDS, else 60; docs/fuzzing.md)
#        scripts/fuzz.sh --fixed     what scripts/test.sh (CI) runs: seed 1 and a fixed number of
#                                    inputs per target instead of a time, so that every machine
#                                    tries the same inputs and a landing is not failed by luck;
#                                    new inputs are found by the timed, randomly seeded runs.
# Without clang++ or libFuzzer it says so and exits 0 (the g++ build fuzzes the same contract
# deterministically in ctest: coordinator_fuzz_test).
set -euo pipefail
cd "$(dirname "$0")/.."
fixed=0
if [ "${1:-}" = --fixed ]; then fixed=1; shift; fi
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
cmake --build "$build" -j "${JOBS:-$(nproc)}" --target job_spec_fuzzer job_file_fuzzer
echo "fuzz: built in $(( $(date +%s) - start )) s"

crashes="$build/fuzz-crashes"
mkdir -p "$build/fuzz-corpus" "$build/fuzz-corpus-text" "$crashes"
for seed in tests/fuzz/seeds/*.textproto; do
  protoc --encode=pipetrain.v1.JobSpec -I proto pipetrain/v1/job.proto \
    < "$seed" > "$build/fuzz-corpus/seed-$(basename "$seed" .textproto)"
done

# fuzz TARGET SECONDS RUNS CORPUS SEEDS...: runs one target for SECONDS (random seed), or with
# --fixed for RUNS inputs from seed 1; on failure prints the inputs and exits 1.
fuzz() {
  local target=$1 seconds=$2 runs=$3 log="$build/fuzz-$1.log" bound
  shift 3
  [ "$seconds" -ge 1 ] || seconds=1  # 0 would mean no limit
  if [ "$fixed" = 1 ]; then
    # The time cap only guards CI's clock: these runs take ~20 and ~15 s here.
    bound=(-seed=1 -runs="$runs" -max_total_time=$(( 3 * seconds )))
    echo "fuzz: $target, $runs inputs from seed 1 (at most $(( 3 * seconds )) s)"
  else
    bound=(-max_total_time="$seconds")
    echo "fuzz: $target for $seconds s"
  fi
  touch "$crashes/.start-$target"
  if "$build/tests/fuzz/$target" "${bound[@]}" -print_final_stats=1 \
       -dict=tests/fuzz/job_spec.dict -artifact_prefix="$crashes/$target-" -rss_limit_mb=4096 \
       -timeout=10 "$@" 2> "$log"; then
    grep -E "^(stat::number_of_executed_units|stat::new_units_added|Done)" "$log" || true
    return 0
  fi
  grep -m1 "INFO: Seed:" "$log" || true  # -seed=N replays this run
  # From the first report (a broken contract, or a sanitizer's/libFuzzer's ERROR) on.
  if grep -qE "contract broken|ERROR:" "$log"; then
    sed -n -E '/contract broken|ERROR:/,$p' "$log" | head -n 120
  else
    tail -n 60 "$log"
  fi
  find "$crashes" -name "$target-*" -newer "$crashes/.start-$target" | while read -r input; do
    echo "---- $input as text:"
    if [ "$target" = job_spec_fuzzer ]; then
      protoc --decode=pipetrain.v1.JobSpec -I proto pipetrain/v1/job.proto < "$input" ||
        echo "(not decodable)"
    else
      cat -v "$input"; echo
    fi
    echo "---- hex:"
    od -A d -t x1 "$input" | head -n 20
  done
  echo "fuzz: FAILED (see above; inputs in $crashes/)"
  exit 1
}
fuzz job_spec_fuzzer $(( budget - budget / 3 )) 300000 "$build/fuzz-corpus"
fuzz job_file_fuzzer $(( budget / 3 )) 100000 "$build/fuzz-corpus-text" tests/fuzz/seeds_text
echo "fuzz: passed ($(( $(date +%s) - start )) s in all)"
