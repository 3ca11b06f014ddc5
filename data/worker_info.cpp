#include "data/worker_info.h"

namespace ember::data {
namespace {
// Process-global: written once in a freshly forked worker (single-threaded at that point),
// then only read. The main process never writes it.
std::optional<WorkerInfo> g_worker_info;
}  // namespace

std::optional<WorkerInfo> get_worker_info() { return g_worker_info; }

namespace detail {
void set_worker_info(const WorkerInfo& info) { g_worker_info = info; }
}  // namespace detail

}  // namespace ember::data
