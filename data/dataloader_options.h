// DataLoaderOptions: the knobs of torch.utils.data.DataLoader, as a plain aggregate
// (DataLoaderOptions{.batch_size = 64, .shuffle = true, .num_workers = 2}). Value type.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "core/generator.h"
#include "data/batch_sampler.h"
#include "data/sampler.h"

namespace ember::data {

struct DataLoaderOptions {
  size_t batch_size = 1;
  /// Reshuffle every epoch (a RandomSampler drawing from `generator`). Not with `sampler`.
  bool shuffle = false;
  /// Index order; default Sequential (or Random with shuffle). Not with `shuffle`.
  std::shared_ptr<Sampler> sampler{};
  /// Whole batches of indices; excludes batch_size, shuffle, sampler and drop_last.
  std::shared_ptr<BatchSampler> batch_sampler{};
  /// 0: load in the calling thread. N > 0: N forked worker processes.
  int num_workers = 0;
  /// Drop the last, short batch.
  bool drop_last = false;
  /// Longest wait for one batch from the workers, in ms (0: forever); exceeding it throws TimeoutError.
  int64_t timeout_ms = 0;
  /// Runs in each worker after ember's default generator was seeded, with the worker id.
  std::function<void(int worker_id)> worker_init_fn{};
  /// Source of each epoch's base seed and of the shuffling order; default: ember's default generator.
  std::shared_ptr<Generator> generator{};
  /// Batches in flight per worker.
  int prefetch_factor = 2;
  /// Keep the workers (and their dataset copies) alive across epochs.
  bool persistent_workers = false;
  /// Deliver batches in pinned host memory, ready for to(cuda, non_blocking=true). Without a
  /// CUDA device batches stay in ordinary memory, with a warning (Note [Pinned batches] in
  /// data/detail/pin_batch.h). Pinned memory is usable from every GPU, so there is no
  /// pin_memory_device.
  bool pin_memory = false;
};

}  // namespace ember::data
