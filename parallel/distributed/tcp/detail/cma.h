// Same-host fast path of the tcp backend: when every rank of a group runs on this host and
// may read the others' memory (Linux cross-memory attach, process_vm_readv), large
// all_reduces move their data with one kernel copy straight from the peer's tensor instead of
// through loopback TCP (two copies plus the TCP stack); the group's TCP connections still
// carry the handshake, so a peer that dies or hangs fails the collective exactly as before.
// See Note [Same-host all_reduce] in tcp/all_reduce.cpp. probe_cma() decides it once per group.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "parallel/distributed/store.h"

namespace ember::parallel::tcp::detail {

/// The pid of every rank when all of them are on this host and this rank can read its ring
/// neighbour's memory, and every other rank reported the same for its own; empty otherwise
/// (or when `enabled` is false, or EMBER_TCP_CMA=0). Collective: every rank of the group calls
/// it at construction, after the mesh is connected. Keys under "tcp/cma/".
std::vector<pid_t> probe_cma(Store& store, int rank, int size, bool enabled, int64_t timeout_ms);

/// Copies n bytes at `remote` in process `pid` to `local`. Returns "" or why it failed
/// ("No such process", a short read).
std::string cma_read(pid_t pid, void* local, uint64_t remote, size_t n);

}  // namespace ember::parallel::tcp::detail
