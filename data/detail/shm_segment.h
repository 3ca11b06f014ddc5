// Shared-memory buffers that carry collated batches from a worker process to the DataLoader.
// A worker creates one per batch, fills it, and passes its descriptor to the parent over its
// socket (data/detail/wire.h); the parent maps it and closes the descriptor, so the memory
// lives exactly as long as the tensors viewing it. A buffer never has a name: see Note
// [Nameless batches] in shm_segment.cpp. Thread-safe: every function works on its own descriptors.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "core/fd_io.h"

namespace ember::data::detail {

/// What the kernel calls every batch buffer ("/memfd:ember_dl_batch (deleted)" in
/// `/proc/<pid>/maps`); nothing of that name ever appears in /dev/shm.
constexpr const char* kBufferName = "ember_dl_batch";

/// An mmap'd region; munmaps when destroyed. Move-only.
class ShmMapping {
 public:
  ShmMapping(void* data, size_t num_bytes) : data_(data), num_bytes_(num_bytes) {}
  ShmMapping(const ShmMapping&) = delete;
  ShmMapping& operator=(const ShmMapping&) = delete;
  ~ShmMapping();
  void* data() const { return data_; }
  size_t num_bytes() const { return num_bytes_; }

 private:
  void* data_;
  size_t num_bytes_;
};

/// A nameless shared buffer: its descriptor (to pass on) and the creator's mapping.
struct SharedBuffer {
  io::UniqueFd fd;
  std::unique_ptr<ShmMapping> mapping;
};

/// Creates a nameless shared buffer of num_bytes (> 0) and maps it read-write. The space is
/// reserved up front, so writing the mapping cannot SIGBUS; when it cannot be reserved,
/// throws ember::Error "<who>: no shared memory left for a X MB batch ...".
SharedBuffer create_shared_buffer(size_t num_bytes, const std::string& who);
/// Maps num_bytes of a buffer whose descriptor came from `who` (a worker), read-write. Throws
/// ValueError "<who> sent a X-byte batch buffer for a Y-byte batch" when the buffer is smaller
/// than num_bytes (touching past its end would SIGBUS), ember::Error when it cannot be mapped.
/// The descriptor stays the caller's.
std::unique_ptr<ShmMapping> map_shared_buffer(int fd, size_t num_bytes, const std::string& who = "a DataLoader worker");

}  // namespace ember::data::detail
