#!/usr/bin/env bash
# The main job: installs dependencies, builds, and runs pipetrain locally on the default job.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
exec build/client/pipetrain plan --schedule 1f1b --workers 4 --microbatches 8 "$@"
