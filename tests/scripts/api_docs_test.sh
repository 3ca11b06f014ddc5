#!/usr/bin/env bash
# api_docs_test.sh SOURCE_DIR WORK_DIR: scripts/api_docs.sh passes on the public headers as they
# are, covers exactly the installed (public) headers, and fails, naming the file, when one of
# them carries malformed documentation. Exit 77 (skipped) without doxygen.
set -euo pipefail
src=$1 work=$2
command -v doxygen >/dev/null || { echo "SKIP: doxygen is not installed (./scripts/setup.sh docs)"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work" && mkdir -p "$work"
# A copy of what the step reads: the script, Doxyfile, the header lister and the headers.
copy=$work/tree
mkdir -p "$copy/scripts" "$copy/cmake"
cp "$src/scripts/api_docs.sh" "$copy/scripts/"
cp "$src/Doxyfile" "$copy/"
cp "$src/cmake/EmberInstallHeaders.cmake" "$copy/cmake/"
(cd "$src" && find core autograd nn data parallel tensorboard profiler ember -name '*.h' -print0 | xargs -0 cp --parents -t "$copy")

"$copy/scripts/api_docs.sh" "$work/good" >"$work/good.out" 2>&1 || { cat "$work/good.out"; fail "the public headers have Doxygen warnings"; }
list=$work/good/public_headers.txt
grep -qx core/tensor.h "$list" || fail "core/tensor.h is not in the reference's input"
grep -qx parallel/distributed_data_parallel.h "$list" || fail "DistributedDataParallel's header is not in the input"
! grep -q '^parallel/distributed/mpi/detail/mpi_types\.h$' "$list" || fail "a header including mpi.h (not installed) is in the input"
[ -f "$work/good/html/classember_1_1Tensor.html" ] || fail "no page for ember::Tensor"

# Malformed documentation in a public header fails the step and names the header.
printf '/// Broken: \\unknowncommandxyz and an <unbalanced> tag.\nvoid api_docs_test_probe();\n' >>"$copy/nn/linear.h"
if "$copy/scripts/api_docs.sh" "$work/bad" >"$work/bad.out" 2>&1; then fail "a header with a malformed comment passed"; fi
grep -q 'nn/linear.h' "$work/bad.out" || { cat "$work/bad.out"; fail "the failure does not name nn/linear.h"; }
echo "api_docs: $(wc -l <"$list") public headers documented without warnings; a malformed comment fails the step"
