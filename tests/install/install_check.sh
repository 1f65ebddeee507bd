#!/usr/bin/env bash
# `cmake --install` into a temporary prefix gives the five binaries, the docs, README and
# LICENSE; every installed binary answers --version with its name, the project version and the
# git revision.
#   install_check.sh BUILD_DIR VERSION
set -euo pipefail
build=$1 version=$2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" > /dev/null
status=0
for f in bin/pipetrain bin/pipetrain-coordinator bin/pipetrain-worker bin/pipetrain-data \
         bin/pipetrain-generate \
         share/doc/pipetrain/README.md share/doc/pipetrain/LICENSE \
         share/doc/pipetrain/ARCHITECTURE.md share/doc/pipetrain/security.md; do
  [ -e "$prefix/$f" ] || { echo "FAIL: $f not installed"; status=1; }
done
for b in pipetrain pipetrain-coordinator pipetrain-worker pipetrain-data pipetrain-generate; do
  out=$("$prefix/bin/$b" --version 2>&1) || { echo "FAIL: $b --version exits non-zero: $out"; status=1; continue; }
  if [[ ! "$out" =~ ^$b\ $version\ \(git\ [0-9a-f]{12}(-modified)?\)$ && ! "$out" =~ ^$b\ $version\ \(git\ unknown\)$ ]]; then
    echo "FAIL: $b --version printed '$out'"
    status=1
  fi
done
[ $status -eq 0 ] && echo "install: 5 binaries and the docs; --version on each"
exit $status
