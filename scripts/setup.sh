#!/usr/bin/env bash
# Installs pipetrain's build dependencies from Debian 12's packages, and the Python environment
# of the exported-model check (build/pyenv: Debian's numpy plus `safetensors` from PyPI).
# Idempotent: installs only what is missing, so a second run takes a second.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

packages=(
  build-essential cmake ninja-build pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  libgoogle-glog-dev prometheus-cpp-dev libopenblas-dev libcli11-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev libsqlite3-dev libxxhash-dev libyaml-cpp-dev
  libsentencepiece-dev  # `pipetrain data prepare`: the BPE tokenizer
  libdnnl-dev ocl-icd-opencl-dev  # oneDNN GEMMs (its CMake config needs OpenCL headers)
  prometheus yamllint python3-yaml openssl  # promtool: the rules' CTest tests, deploy/check.sh
  clang libclang-rt-dev  # scripts/fuzz.sh: libFuzzer
  python3-numpy python3-venv  # tests/export: the numpy forward pass of an exported model
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
else
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The exported-model check (tests/export/numpy_forward_check.py) reads safetensors files with
# Hugging Face's `safetensors` package, which Debian does not package: a virtual environment
# that sees Debian's numpy gets it from PyPI once. CMake finds its interpreter there.
pyenv="$root/build/pyenv"
if "$pyenv/bin/python3" -c 'import numpy, safetensors.numpy' 2>/dev/null; then
  echo "setup: $pyenv has numpy and safetensors"
else
  echo "setup: creating $pyenv (numpy from Debian, safetensors from PyPI)"
  /usr/bin/python3 -m venv --system-site-packages --clear "$pyenv"
  "$pyenv/bin/python3" -m pip install --quiet --disable-pip-version-check 'safetensors>=0.4,<1'
  "$pyenv/bin/python3" -c 'import numpy, safetensors.numpy'
fi
echo "setup: done"
