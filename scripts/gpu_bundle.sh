#!/usr/bin/env bash
# gpu_bundle.sh [BUILD_DIR] [OUT_DIR] -- packs what scripts/gpu_check.sh runs into a folder of at
# most 64 MiB that runs on a machine with a GPU but without ember's Debian packages (OpenBLAS,
# Boost, OpenMPI, GoogleTest): the GPU test binaries, rnn_dp, ember-run, ember-bench-lstm,
# ember-bench-allreduce, ember-bench-dp, ember-gpu-info, the shared libraries they load (found
# with ldd), the example's word lists, the PyTorch side of the LSTM benchmark
# (bench/bench_lstm_torch.py: run where the GPU machine's python3 has a CUDA torch), and
# gpu_check.sh itself.
# Binaries, libraries and word lists travel as payload.tar.xz: each binary carries its own copy
# of ember's device code (~11 MB), and xz's 64 MiB window (-9) stores the copies once, where
# gzip's 32 KiB window could not. gpu_check.sh unpacks it under ${TMPDIR:-/tmp} (tar -xJf, or
# Python's lzma where xz is missing), no compiling.
# Before packing it checks that every binary loads from the bundle: each library ldd resolves must
# come from the bundle's lib/ or be one the GPU machine provides (glibc's, the driver's, the CUDA
# toolkit's cuBLAS, NCCL and cuDNN, which a CUDA build of PyTorch brings); a library resolved from
# anywhere else (e.g. OpenBLAS or Boost from /usr/lib) fails the bundle, naming it.
#
# BUILD_DIR (default build/cuda) must be a CUDA build with tests, bench and examples for the
# target GPU's architecture, e.g.
#   cmake --preset cuda -DCMAKE_CUDA_ARCHITECTURES=90 -DEMBER_BUILD_TESTS=ON \
#         -DEMBER_BUILD_BENCH=ON -DEMBER_BUILD_EXAMPLES=ON && cmake --build build/cuda
# OUT_DIR defaults to gpu-bundle/. On the GPU machine: OUT_DIR/gpu_check.sh [LOG_DIR].
#
# Not bundled: the NVIDIA driver (libcuda) and the CUDA 13 toolkit's big libraries (cuBLAS and
# cuBLASLt alone are ~600 MiB, NCCL and cuDNN more): the GPU machine provides them (the toolkit
# cuBLAS; a CUDA build of PyTorch NCCL and cuDNN, whose nvidia/*/lib folders gpu_check.sh puts on
# the loader's path), and gpu_check.sh names any that its loader cannot find. The small CUDA
# runtime (libcudart) is bundled. Fails when a needed library is missing here, a binary would load
# one from outside the bundle that the GPU machine lacks, or the folder exceeds the limit.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/cuda}
out=${2:-gpu-bundle}
limit_bytes=$((64 * 1024 * 1024))

[ -f "$build/CMakeCache.txt" ] || { echo "gpu_bundle: $build is not a CMake build directory" >&2; exit 1; }
grep -q '^EMBER_CUDA:STRING=ON' "$build/CMakeCache.txt" ||
  { echo "gpu_bundle: $build is not an EMBER_CUDA=ON build" >&2; exit 1; }
archs=$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$build/CMakeCache.txt")

gpu_tests=$(ctest --test-dir "$build" -N -L gpu | sed -n 's/^ *Test *#[0-9]*: *//p')
[ -n "$gpu_tests" ] || { echo "gpu_bundle: no test labelled gpu in $build (built with tests?)" >&2; exit 1; }

rm -rf "$out"
stage=$out/.stage
mkdir -p "$stage/bin" "$stage/lib" "$stage/dict" "$stage/bench"
cp bench/bench_lstm_torch.py "$stage/bench/"
for name in $gpu_tests rnn_dp ember-run ember-bench-lstm ember-bench-allreduce ember-bench-dp ember-gpu-info; do
  f=$(find "$build" -name "$name" -type f -perm -u+x -not -path '*/CMakeFiles/*' | head -1)
  [ -n "$f" ] || { echo "gpu_bundle: $name was not built in $build" >&2; exit 1; }
  cp "$f" "$stage/bin/$name"
  strip --strip-unneeded "$stage/bin/$name"
done
printf '%s\n' $gpu_tests >"$out/gpu_tests.txt"

# Shared libraries: everything ldd resolves except the C runtime (glibc's own libraries, which a
# Linux machine has in a compatible version), the driver, and the CUDA toolkit's large libraries.
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|libcuda\.so|libcublas|libcublasLt|libnccl|libcudnn|libnvidia)'
missing=""
for f in "$stage"/bin/*; do
  while read -r lib _ path _; do
    [ -n "$lib" ] || continue
    if [[ "$path" == "not" ]]; then missing+=" $lib"; continue; fi
    [[ "$lib" =~ $skip ]] && continue
    [ -f "$stage/lib/$lib" ] || cp -L "$path" "$stage/lib/$lib"
  done < <(ldd "$f" | awk '/=>/ {print $1, $2, $3}')
done
[ -z "$missing" ] || { echo "gpu_bundle: libraries not found on this machine:$missing" >&2; exit 1; }
for lib in "$stage"/lib/*; do strip --strip-unneeded "$lib" 2>/dev/null || true; done

# Every binary loads from the bundle: what ldd resolves with the bundle's lib/ first is either
# there or provided by the GPU machine (the skip list).
stray=""
for f in "$stage"/bin/*; do
  while read -r lib _ path _; do
    [ -n "$lib" ] && [ "$path" != "not" ] || continue
    [[ "$lib" =~ $skip ]] && continue
    [[ "$path" == "$stage/lib/"* ]] || stray+=" ${f##*/}:$lib=>$path"
  done < <(LD_LIBRARY_PATH="$stage/lib" ldd "$f" | awk '/=>/ {print $1, $2, $3}')
done
[ -z "$stray" ] || { echo "gpu_bundle: libraries that would be missing on the GPU machine:$stray" >&2; exit 1; }

# The example's word lists (Debian's wamerican, wngerman, ... ; read from --dict-dir).
for f in /usr/share/dict/*; do
  [ -f "$f" ] && [ "${f##*/}" != README.select-wordlist ] && cp -L "$f" "$stage/dict/"
done

{
  echo "ember $(git rev-parse --short HEAD 2>/dev/null || echo unknown), CUDA architectures $archs"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname) ($(. /etc/os-release && echo "$PRETTY_NAME"))"
  echo "needs from the GPU machine: the NVIDIA driver and the CUDA 13 libraries:"
  ldd "$stage"/bin/* | awk '/=>/ {print $1}' | grep -E '^(libcublas|libcublasLt|libnccl|libcudnn)' | sort -u | sed 's/^/  /'
} >"$out/BUNDLE"
echo "gpu_bundle: $(ls "$stage/bin" | wc -l) binaries, $(ls "$stage/lib" | wc -l) libraries," \
  "$(($(du -sb "$stage" | cut -f1) / 1024 / 1024)) MiB unpacked"
tar -C "$stage" -cf - bin lib dict bench | xz -9 -T1 >"$out/payload.tar.xz"
rm -rf "$stage"
cp scripts/gpu_check.sh "$out/gpu_check.sh"

size=$(du -sb "$out" | cut -f1)
echo "gpu_bundle: $out: $((size / 1024 / 1024)) MiB ($size bytes)"
if [ "$size" -gt "$limit_bytes" ]; then
  echo "gpu_bundle: $out is larger than 64 MiB" >&2
  exit 1
fi
