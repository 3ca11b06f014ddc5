// CPU affinity: which CPUs this process may run on, and binding it to a subset. ember-run
// binds each local rank to its own block of CPUs (as mpirun's --bind-to core), the thread
// pool sizes itself from what the process may use, and ember-bench-ddp binds its ranks the
// way ember-run does. Linux only (sched_{get,set}affinity). Thread-safe.
#pragma once
#include <string>
#include <vector>

namespace ember {

/// The CPUs this process may run on, ascending; {0 .. hardware_concurrency - 1} when the
/// affinity mask cannot be read.
std::vector<int> allowed_cpus();

/// allowed_cpus().size(), at least 1.
int available_cpu_count();

/// The block of `cpus` for local rank `local_rank` of `local_world`: cpus.size() / local_world
/// consecutive entries, the first `cpus.size() % local_world` ranks one more. Empty when
/// there are fewer CPUs than ranks (nothing to bind to: ranks would have to share).
std::vector<int> cpu_block(const std::vector<int>& cpus, int local_rank, int local_world);

/// cpu_block and bind_process_to_cpus throw ember::ValueError (core/error.h) for bad arguments.
/// Restricts the calling process (every thread it starts afterwards too, and programs it
/// execs) to `cpus`. Throws Error naming the CPUs and errno's text when the kernel refuses.
void bind_process_to_cpus(const std::vector<int>& cpus);

/// "0-3", "0,2,5-7": a CPU list as taskset and /proc write it.
std::string cpu_list_string(const std::vector<int>& cpus);

}  // namespace ember
