// Generator: a counter-based Philox4x32-10 stream (seed = key, offset = counter). Kernels
// reserve counter ranges, so the same seed produces the same numbers on CPU and CUDA and
// regardless of thread count. One default generator per device plus user Generators.
// Thread-safe: every method takes the generator's mutex.
#pragma once
#include <cstdint>
#include <mutex>
#include <vector>

#include "core/device.h"

namespace ember {

constexpr uint64_t kDefaultSeed = 67280421310721ull;  // PyTorch's default_rng_seed_val

/// What a kernel needs to reproduce its slice of the stream.
struct PhiloxState {
  uint64_t seed = 0;
  uint64_t offset = 0;  // in units of 128-bit Philox blocks (4 x uint32)
};

class Generator {
 public:
  explicit Generator(uint64_t seed = kDefaultSeed, Device device = Device::cpu());
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  void manual_seed(uint64_t seed);      // also resets the offset to 0
  uint64_t initial_seed() const;
  /// Draws a fresh non-deterministic seed (std::random_device), sets and returns it.
  uint64_t seed();
  /// Opaque state: 16 bytes (seed, offset), as a uint8 vector like torch.Generator.get_state().
  std::vector<uint8_t> get_state() const;
  /// Throws ValueError when `state` is not a state produced by get_state().
  void set_state(const std::vector<uint8_t>& state);
  Device device() const { return device_; }
  /// Counts manual_seed / seed / set_state calls: state derived from the generator elsewhere
  /// (the cuDNN RNN's dropout states) is re-drawn when it changes, as PyTorch's
  /// reset_rnn_state flag does.
  uint64_t seed_epoch() const;

  /// Reserves `num_blocks` Philox blocks and returns where they start.
  PhiloxState reserve(uint64_t num_blocks);
  /// Convenience for host code: the next 64 random bits (consumes one block).
  uint64_t next_u64();

 private:
  mutable std::mutex mu_;
  uint64_t seed_;    // guarded by mu_
  uint64_t offset_;  // guarded by mu_
  uint64_t seed_epoch_ = 0;  // guarded by mu_
  Device device_;
};

/// The default generator of `device` (created on first use, seeded with kDefaultSeed).
Generator& default_generator(Device device = Device::cpu());
/// Seeds the default generators of every device (CPU and CUDA), as torch.manual_seed.
void manual_seed(uint64_t seed);

}  // namespace ember
