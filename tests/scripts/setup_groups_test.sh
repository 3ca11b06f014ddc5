#!/usr/bin/env bash
# setup_groups_test.sh SOURCE_DIR: scripts/setup.sh's groups (EMBER_SETUP_PRINT=1, nothing is
# installed). run_example.sh installs what the example needs and not what only the tests use;
# test.sh's default installs every package of every group but torch.
set -euo pipefail
src=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
groups=$(sed -n 's|^\./scripts/setup\.sh \(.*\)$|\1|p' "$src/scripts/run_example.sh")
[ -n "$groups" ] || fail "run_example.sh does not call ./scripts/setup.sh GROUP..."
example=$(EMBER_SETUP_PRINT=1 "$src/scripts/setup.sh" $groups)
all=$(EMBER_SETUP_PRINT=1 "$src/scripts/setup.sh")
for p in cmake libopenblas-dev libboost-dev nlohmann-json3-dev libcli11-dev wamerican wngerman; do
  grep -qx "$p" <<<"$example" || fail "run_example.sh ($groups) does not install $p"
done
for p in slurmd slurmctld bible-kjv-text libgtest-dev libbenchmark-dev clang doxygen python3-torch; do
  ! grep -qx "$p" <<<"$example" || fail "run_example.sh ($groups) installs $p, which only the tests use"
done
while read -r p; do
  grep -qx "$p" <<<"$all" || fail "the default groups (test.sh) lack $p, which run_example.sh installs"
done <<<"$example"
for p in slurmd bible-kjv-text libgtest-dev libgmock-dev libbenchmark-dev clang libclang-rt-dev doxygen; do
  grep -qx "$p" <<<"$all" || fail "the default groups (test.sh) lack $p"
done
torch=$(EMBER_SETUP_PRINT=1 EMBER_SETUP_TORCH=1 "$src/scripts/setup.sh" build)
grep -qx python3-torch <<<"$torch" || fail "EMBER_SETUP_TORCH=1 does not add python3-torch"
grep -q 'EMBER_SETUP_TORCH=1 ./scripts/setup.sh$' "$src/scripts/test.sh" || fail "test.sh does not install every group"
if EMBER_SETUP_PRINT=1 "$src/scripts/setup.sh" build nonsense 2>err.txt; then fail "an unknown group was accepted"; fi
grep -q "unknown group 'nonsense'" err.txt || fail "an unknown group's error does not name it: $(cat err.txt)"
echo "setup groups: run_example.sh installs $(wc -l <<<"$example") packages ($groups), test.sh $(wc -l <<<"$all") + torch"
