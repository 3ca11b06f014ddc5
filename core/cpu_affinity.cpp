#include "core/cpu_affinity.h"

#include <sched.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "core/error.h"

namespace ember {

std::vector<int> allowed_cpus() {
  std::vector<int> out;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) out.push_back(c);
    }
  }
  if (out.empty()) {
    const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned c = 0; c < hw; ++c) out.push_back(static_cast<int>(c));
  }
  return out;
}

int available_cpu_count() { return static_cast<int>(allowed_cpus().size()); }

std::vector<int> cpu_block(const std::vector<int>& cpus, int local_rank, int local_world) {
  EMBER_CHECK_T(ValueError, local_world >= 1 && local_rank >= 0 && local_rank < local_world,
                "cpu_block: expected 0 <= local_rank < local_world, got local_rank ", local_rank, " of ",
                local_world);
  const int n = static_cast<int>(cpus.size());
  if (n < local_world) return {};
  const int per = n / local_world, extra = n % local_world;
  const int begin = local_rank * per + std::min(local_rank, extra);
  const int len = per + (local_rank < extra ? 1 : 0);
  return std::vector<int>(cpus.begin() + begin, cpus.begin() + begin + len);
}

void bind_process_to_cpus(const std::vector<int>& cpus) {
  EMBER_CHECK_T(ValueError, !cpus.empty(), "bind_process_to_cpus: expected at least one CPU, got none");
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    EMBER_CHECK_T(ValueError, c >= 0 && c < CPU_SETSIZE, "bind_process_to_cpus: CPU ", c, " is out of range [0, ",
                  CPU_SETSIZE, ")");
    CPU_SET(c, &set);
  }
  EMBER_CHECK(::sched_setaffinity(0, sizeof set, &set) == 0, "bind_process_to_cpus: cannot bind to CPUs ",
              cpu_list_string(cpus), ": ", std::strerror(errno));
}

std::string cpu_list_string(const std::vector<int>& cpus) {
  std::string s;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!s.empty()) s += ',';
    s += std::to_string(cpus[i]);
    if (j > i) s += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return s;
}

}  // namespace ember
