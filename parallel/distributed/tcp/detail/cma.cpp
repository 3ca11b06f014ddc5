#include "parallel/distributed/tcp/detail/cma.h"

#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/env.h"

namespace ember::parallel::tcp::detail {

namespace {

// What identifies this host's running kernel: ranks with the same boot id share a machine.
std::string boot_id() {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(f, id);
  return id;
}

// A pattern each rank exposes for its neighbour's trial read; per-process, so a rank that
// reads its own copy by mistake (another process at the same address) does not pass.
struct Probe {
  uint64_t words[4];
};
Probe& probe_buffer() {
  static Probe p = [] {
    Probe q{};
    const uint64_t pid = static_cast<uint64_t>(::getpid());
    for (int i = 0; i < 4; ++i) q.words[i] = 0x9E3779B97F4A7C15ull * (pid + 1 + static_cast<uint64_t>(i));
    return q;
  }();
  return p;
}

std::string to_string(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }

}  // namespace

std::string cma_read(pid_t pid, void* local, uint64_t remote, size_t n) {
  auto* dst = static_cast<uint8_t*>(local);
  size_t done = 0;
  while (done < n) {
    iovec l{dst + done, n - done};
    iovec r{reinterpret_cast<void*>(static_cast<uintptr_t>(remote + done)), n - done};
    const ssize_t got = ::process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return std::strerror(errno);
    }
    if (got == 0) return "read 0 bytes of " + std::to_string(n - done);
    done += static_cast<size_t>(got);
  }
  return "";
}

std::vector<pid_t> probe_cma(Store& store, int rank, int size, bool enabled, int64_t timeout_ms) {
  if (size == 1) return {};
  if (!env::flag("EMBER_TCP_CMA", true)) enabled = false;
  const Probe& mine = probe_buffer();
  {
    std::ostringstream os;
    os << (enabled ? boot_id() : std::string("off")) << ' ' << ::getpid() << ' '
       << reinterpret_cast<uintptr_t>(&mine) << ' ' << mine.words[0] << ' ' << mine.words[1] << ' ' << mine.words[2]
       << ' ' << mine.words[3];
    store.set("tcp/cma/who/" + std::to_string(rank), os.str());
  }
  std::vector<pid_t> pids(static_cast<size_t>(size));
  bool ok = enabled && !boot_id().empty();
  const std::string my_boot = boot_id();
  for (int peer = 0; peer < size; ++peer) {
    std::istringstream in(to_string(store.get("tcp/cma/who/" + std::to_string(peer), timeout_ms)));
    std::string boot;
    long long pid = 0;
    uintptr_t addr = 0;
    Probe expected{};
    in >> boot >> pid >> addr >> expected.words[0] >> expected.words[1] >> expected.words[2] >> expected.words[3];
    pids[static_cast<size_t>(peer)] = static_cast<pid_t>(pid);
    if (!in || boot != my_boot) ok = false;
    // The one this rank reads from in the ring: a trial read of its pattern.
    if (ok && peer == (rank + size - 1) % size) {
      Probe got{};
      if (!cma_read(static_cast<pid_t>(pid), &got, addr, sizeof got).empty() ||
          std::memcmp(&got, &expected, sizeof got) != 0) {
        ok = false;
      }
    }
  }
  store.set("tcp/cma/ok/" + std::to_string(rank), ok ? "1" : "0");
  bool all = true;
  for (int peer = 0; peer < size; ++peer) {
    all = to_string(store.get("tcp/cma/ok/" + std::to_string(peer), timeout_ms)) == "1" && all;
  }
  return all ? pids : std::vector<pid_t>{};
}

}  // namespace ember::parallel::tcp::detail
