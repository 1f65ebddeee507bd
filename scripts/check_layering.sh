#!/usr/bin/env bash
# Checks the module layering (docs/ARCHITECTURE.md): which project directories each module's
# sources may include, and, given a build directory, that the coordinator binary carries none
# of the worker (no OpenBLAS, no transport, no executor). Prints every violation and exits 1 if
# there is any. CTest runs it, and runs --self-test, which plants a forbidden include in a copy
# of the tree and expects this check to catch it.
#
#   scripts/check_layering.sh [SOURCE_DIR] [BUILD_DIR]
#   scripts/check_layering.sh --self-test SOURCE_DIR
set -uo pipefail

if [ "${1:-}" = "--self-test" ]; then
  src=${2:?usage: check_layering.sh --self-test SOURCE_DIR}
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  for d in common schedule model planner kernels coordinator worker client; do
    cp -r "$src/$d" "$tmp/$d"
  done
  if ! "$0" "$tmp" >/dev/null; then
    echo "self-test: the unmodified tree already fails" >&2
    exit 1
  fi
  failures=0
  plant() {  # file, include line: the check must fail with the file named
    local file=$1 line=$2
    cp "$tmp/$file" "$tmp/$file.orig"
    printf '%s\n' "$line" >>"$tmp/$file"
    if out=$("$0" "$tmp" 2>&1); then
      echo "self-test: '$line' in $file was not caught" >&2
      failures=$((failures + 1))
    elif ! grep -q "$file" <<<"$out"; then
      echo "self-test: '$line' in $file: the report does not name the file" >&2
      failures=$((failures + 1))
    fi
    mv "$tmp/$file.orig" "$tmp/$file"
  }
  plant planner/planner.cc '#include "worker/runtime/job_config.h"'
  plant planner/planner.cc '#include "coordinator/job_manager.h"'
  plant coordinator/job_launch.cc '#include "worker/runtime/job_config.h"'
  plant worker/runtime/executor.cc '#include "planner/planner.h"'
  plant client/job_view.cc '#include "worker/model/gpt_chunk.h"'
  plant schedule/simulator.cc '#include "model/gpt_config.h"'
  plant schedule/simulator.cc '#include "pipetrain/v1/plan.pb.h"'
  plant model/job_model.cc '#include "kernels/backend.h"'
  plant common/crc32.cc '#include "schedule/action.h"'
  [ "$failures" -eq 0 ] && echo "self-test: every planted violation was caught"
  exit $((failures > 0))
fi

src=${1:-$(cd "$(dirname "$0")/.." && pwd)}
build=${2:-}
status=0

# module -> the project directories its sources may include (besides third-party headers).
declare -A allowed=(
  [common]="common"
  [schedule]="common schedule"
  [schedule/codec]="common schedule pipetrain"
  [model]="common model pipetrain"
  [kernels]="common kernels"
  [planner]="common pipetrain schedule model planner"
  [coordinator]="common pipetrain schedule model planner coordinator"
  [worker]="common pipetrain schedule model kernels worker"
  [client]="common pipetrain schedule model planner client"
)
project_dirs="common pipetrain schedule model planner kernels coordinator worker client bench tests"

for module in "${!allowed[@]}"; do
  dir="$src/$module"
  [ -d "$dir" ] || continue
  # schedule/ itself excludes its codec/ subdirectory, which has its own rule.
  prune=()
  [ "$module" = schedule ] && prune=(-path "$dir/codec" -prune -o)
  while IFS= read -r file; do
    while IFS=: read -r lineno target; do
      top=${target%%/*}
      case " $project_dirs " in *" $top "*) ;; *) continue ;; esac
      case " ${allowed[$module]} " in
        *" $top "*) ;;
        *)
          echo "layering: ${file#"$src"/}:$lineno includes \"$target\"; $module/ may include" \
               "only ${allowed[$module]} (and third-party headers)"
          status=1
          ;;
      esac
    done < <(grep -n '^#include "' "$file" | sed -E 's/^([0-9]+):#include "([^"]+)".*/\1:\2/')
  done < <(find "$dir" "${prune[@]}" -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' \) -print)
done

# The coordinator binary: no OpenBLAS, no worker code (transport, executor, model chunks).
if [ -n "$build" ]; then
  bin="$build/coordinator/pipetrain-coordinator"
  if [ ! -x "$bin" ]; then
    echo "layering: $bin not built"
    status=1
  else
    if ldd "$bin" | grep -qi 'blas\|dnnl'; then
      echo "layering: pipetrain-coordinator links $(ldd "$bin" | grep -i 'blas\|dnnl' | awk '{print $1}')"
      status=1
    fi
    # Worker-only namespaces: runtime and transports, data readers, compute kernels, chunks.
    pattern='pipetrain::(worker|data|kernels)::|pipetrain::model::GptChunk'
    worker_symbols=$(nm -C --defined-only "$bin" | grep -cE "$pattern")
    if [ "$worker_symbols" -gt 0 ]; then
      echo "layering: pipetrain-coordinator defines $worker_symbols worker-side symbols, e.g."
      nm -C --defined-only "$bin" | grep -E "$pattern" | head -3
      status=1
    fi
  fi
fi

# pipetrain-data links libsentencepiece, which exports its own protobuf-lite: it must never share
# a process with libprotobuf (client/sentencepiece_tokenizer.h), so it links no wire contract.
if [ -n "$build" ]; then
  data_bin="$build/client/pipetrain-data"
  if [ ! -x "$data_bin" ]; then
    echo "layering: $data_bin not built"
    status=1
  elif ldd "$data_bin" | grep -q 'libprotobuf\|libgrpc'; then
    echo "layering: pipetrain-data links $(ldd "$data_bin" | grep -o 'lib\(protobuf\|grpc\)[^ ]*' | head -2 | tr '\n' ' ')"
    status=1
  elif nm -C --defined-only "$data_bin" | grep -q 'pipetrain::v1::'; then
    echo "layering: pipetrain-data defines pipetrain.v1 protobuf messages"
    status=1
  fi
fi

[ "$status" -eq 0 ] && echo "layering: ok"
exit "$status"
