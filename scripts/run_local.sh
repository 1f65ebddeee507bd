#!/usr/bin/env bash
# The main job: installs dependencies, builds, then `pipetrain local` starts a coordinator and
# 4 CPU workers on 127.0.0.1, trains the embedded default model (a small GPT learning 2-digit
# addition) with the V-Half schedule, shows progress, prints the loss curve and predicted vs
# measured bubble and memory per worker, and shuts everything down. Extra arguments go to
# `pipetrain local` (e.g. --schedule 1f1b --steps 50; see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
exec build/client/pipetrain local "$@"
