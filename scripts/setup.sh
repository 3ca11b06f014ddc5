#!/usr/bin/env bash
# setup.sh [GROUP...]: installs the Debian 12 packages ember needs, by purpose. Idempotent:
# quiet when all are present. Needs root or sudo.
#   build    compiler, CMake, Ninja; the libraries ember links: OpenBLAS, Boost.Asio (headers),
#            nlohmann-json and CLI11 (headers), OpenMPI (the mpi backend, and mpirun to launch jobs)
#   example  examples/rnn_dp's data: Debian's word lists in /usr/share/dict
#   tests    GoogleTest, Google Benchmark, word_lm's corpus (bible-kjv-text), a one-node Slurm
#            (rnn_dp_launchers_test's srun), clang + libFuzzer (fuzz/), Doxygen (the API
#            reference step, scripts/api_docs.sh), python3-venv and Chromium (the TensorBoard
#            tests: scripts/tensorboard_venv.sh, a headless browser on TensorBoard's page)
#   docs     Doxygen alone
#   torch    Debian's python3-torch and libtorch-dev: the PyTorch / LibTorch peers of the parity
#            tests and benchmarks (python3-torch is ~1 GB; libtorch-dev adds ~2 MB)
# No GROUP: build example tests (everything scripts/test.sh needs but torch).
# EMBER_SETUP_TORCH=1 adds the torch group to whatever was asked for; EMBER_SETUP_PRINT=1 prints
# the packages of the groups asked for, one a line, and installs nothing.
# ./scripts/run_example.sh asks for build + example; ./scripts/test.sh for all of them.
set -euo pipefail
declare -A group=(
  [build]="build-essential cmake ninja-build pkg-config libopenblas-dev libboost-dev nlohmann-json3-dev libcli11-dev openmpi-bin libopenmpi-dev"
  [example]="wamerican wngerman wfrench witalian wspanish wdutch"
  [tests]="libgtest-dev libgmock-dev libbenchmark-dev bible-kjv-text slurmctld slurmd slurm-client clang libclang-rt-dev doxygen python3-venv chromium"
  [docs]="doxygen"
  [torch]="python3-torch python3-numpy libtorch-dev"
)
asked=("$@")
[ ${#asked[@]} -gt 0 ] || asked=(build example tests)
[ "${EMBER_SETUP_TORCH:-0}" = 1 ] && asked+=(torch)
pkgs=()
for g in "${asked[@]}"; do
  [ -n "${group[$g]+x}" ] || { echo "setup.sh: unknown group '$g' (expected one of: ${!group[*]})" >&2; exit 2; }
  read -ra more <<<"${group[$g]}"
  pkgs+=("${more[@]}")
done
if [ "${EMBER_SETUP_PRINT:-0}" = 1 ]; then printf '%s\n' "${pkgs[@]}" | sort -u; exit 0; fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
echo "ember setup (${asked[*]}): installing ${missing[*]}"
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
