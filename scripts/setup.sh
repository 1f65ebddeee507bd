#!/usr/bin/env bash
# Installs pipetrain's build dependencies from Debian 12's packages. Idempotent: installs only
# what is missing, so a second run takes a second.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  libgoogle-glog-dev prometheus-cpp-dev libopenblas-dev libcli11-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev libsqlite3-dev libxxhash-dev libyaml-cpp-dev
  libsentencepiece-dev  # `pipetrain data prepare`: the BPE tokenizer
  prometheus yamllint python3-yaml openssl
  clang libclang-rt-dev  # scripts/fuzz.sh: libFuzzer
)
# deploy/check.sh needs a kubectl with `kubectl kustomize`; Debian's kubernetes-client
# conflicts with a kubectl package that some images already carry, so only add it if missing.
command -v kubectl >/dev/null 2>&1 || packages+=(kubernetes-client)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
