// WorkerInfo and get_worker_info(): inside a DataLoader worker process, who this worker is
// (id, how many there are, its seed, the worker's copy of the dataset); in the main process,
// nothing. Set once per worker process before worker_init_fn runs; reading it is thread-safe.
#pragma once
#include <cstdint>
#include <optional>

namespace ember::data {

struct WorkerInfo {
  int id = 0;             // 0 .. num_workers-1
  int num_workers = 0;
  uint64_t seed = 0;      // base_seed + id: ember's default CPU generator was seeded with it
  void* dataset = nullptr;  // this worker's copy of the loader's dataset (see dataset_as)

  /// The dataset as the type the DataLoader was built with (the caller must name that type).
  template <typename D>
  D* dataset_as() const { return static_cast<D*>(dataset); }
};

/// The calling process's worker info; std::nullopt in the main process (like
/// torch.utils.data.get_worker_info() returning None).
std::optional<WorkerInfo> get_worker_info();

namespace detail {
/// Called by the worker machinery right after fork().
void set_worker_info(const WorkerInfo& info);
}  // namespace detail

}  // namespace ember::data
