// Streams: ordered queues of work on a device, in PyTorch's model (Note [Current stream]).
// Device-neutral: on CUDA a Stream names a cudaStream_t; a CPU device has one stream (id 0)
// on which work runs synchronously. The current stream is per host thread and per device;
// everything else here is thread-safe.
#pragma once
#include <cstdint>
#include <ostream>

#include "core/device.h"

namespace ember {

// Note [Current stream]
// Every CUDA op launches on the current stream of its device (core/kernels/cuda/launch.cuh), and the
// cuBLAS handle is bound to that stream before each call. The current stream starts as the
// device's default stream (id 0, CUDA's legacy default stream, which orders against every
// other blocking stream) and is changed per thread with StreamGuard or set_current_stream.
// Streams from new_stream() are non-blocking CUDA streams from a per-device pool, created on
// first use and never destroyed (as PyTorch's pool), so a Stream value stays valid for the
// life of the process. Memory used on a stream other than the one it was allocated on must be
// marked with record_stream (core/allocator.h) before it is freed.

class Stream {
 public:
  /// The default stream of `device`.
  explicit Stream(Device device = Device::cpu(), uint64_t id = 0) : device_(device), id_(id) {}
  Device device() const { return device_; }
  /// 0 for the default stream; on CUDA otherwise the cudaStream_t's bits.
  uint64_t id() const { return id_; }
  bool is_default() const { return id_ == 0; }
  /// Blocks until all work queued on the stream has finished (a no-op on CPU). Throws Error
  /// naming an asynchronous CUDA error, if one is pending.
  void synchronize() const;
  /// True when all queued work has finished.
  bool query() const;

  bool operator==(const Stream& o) const { return device_ == o.device_ && id_ == o.id_; }
  bool operator!=(const Stream& o) const { return !(*this == o); }

 private:
  Device device_;
  uint64_t id_;
};

std::ostream& operator<<(std::ostream& os, const Stream& s);

/// The calling thread's current stream on `device` (its default stream unless set).
Stream current_stream(Device device);
/// Makes `s` the calling thread's current stream on s.device(). Throws DeviceError when its CUDA
/// device does not exist, Error for a CPU stream other than the default.
void set_current_stream(Stream s);
/// A stream from `device`'s pool (round robin over kStreamPoolSize non-blocking CUDA streams);
/// the default stream on CPU. Throws DeviceError when a CUDA device does not exist.
Stream new_stream(Device device);
constexpr int kStreamPoolSize = 32;

/// Makes `s` current on its device for the guard's lifetime, then restores the previous one.
class StreamGuard {
 public:
  explicit StreamGuard(Stream s);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_;
};

namespace detail {
// The CUDA side of streams (core/cuda/cuda_stream.cpp; stubs that throw without CUDA).
uint64_t cuda_pool_stream(int device_index, int slot);
void cuda_stream_synchronize(int device_index, uint64_t id);
bool cuda_stream_query(int device_index, uint64_t id);
}  // namespace detail

}  // namespace ember
