#!/usr/bin/env bash
# Installs every Debian package ember needs. Idempotent: quiet when all are present.
#   EMBER_SETUP_TORCH=1 also installs python3-torch (the PyTorch peer for parity tests and benchmarks)
#   and libtorch-dev (ember-bench-wordlm's LibTorch C++ peer; about 5 s and 2 MB more, since
#   python3-torch already brings libtorch1.13).
set -euo pipefail
pkgs=(
  build-essential cmake ninja-build pkg-config
  libopenblas-dev                # matmul on CPU (cblas_sgemm)
  libboost-dev                   # Boost.Asio (header-only) for TCPStore and the tcp backend
  openmpi-bin libopenmpi-dev     # the mpi backend and mpirun
  libgtest-dev libgmock-dev      # tests
  libbenchmark-dev               # bench/
  nlohmann-json3-dev             # safetensors headers, store messages
  wamerican wngerman wfrench witalian wspanish wdutch   # examples/rnn_dp data
  bible-kjv-text                 # examples/word_lm corpus (/usr/lib/bible.data, 2.5 MB)
  slurmctld slurmd slurm-client  # rnn_dp_launchers_test's one-node Slurm (srun; ~5 s of the suite)
  clang libclang-rt-dev          # fuzz/: libFuzzer and the sanitizer runtimes it links (preset fuzz)
)
if [ "${EMBER_SETUP_TORCH:-0}" = 1 ]; then pkgs+=(python3-torch python3-numpy libtorch-dev); fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "ember setup: installing ${missing[*]}"
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
