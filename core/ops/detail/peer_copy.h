// The ordering of a copy between two CUDA devices (Note [Copies between devices]), written once
// against an abstract set of stream operations so that the sequence is testable on CPU with a
// fake; core/cuda/cuda_peer_copy.cpp provides the CUDA operations. Device-neutral (no CUDA
// headers). Stateless: thread-safe as far as the operations are.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ember::native::detail {

// Note [Copies between devices]
// ember's pool streams are non-blocking CUDA streams, so a plain cudaMemcpyPeer (ordered only
// with the legacy default streams) is ordered neither with the kernels that produced the source
// on the source device's current stream nor with the destination's current stream, and the
// caching allocator may hand either block to new work while the copy still runs. A copy between
// devices therefore runs as a two-way event handshake between the two current streams:
//   1. record event A on the source's current stream (the source's producers are before it);
//   2. the destination's current stream waits for A;
//   3. the copy (cudaMemcpyPeerAsync) runs on the destination's current stream, after every
//      earlier use of the destination block there (write-after-write, write-after-read);
//   4. record event B on the destination's stream after the copy;
//   5. the source's current stream waits for B, so later work on the source block (an in-place
//      op, or the allocator reusing it after a free) runs after the copy has read it;
//   6. unless non_blocking, the host waits for the destination's stream (step 3's stream), so a
//      blocking copy_ has finished when it returns and threads working on other streams may use
//      the result at once (PyTorch does not wait for a copy between GPUs).
// Events are created and recorded with their own device current (the legacy default stream,
// id 0, means the current device's one), and destroyed right after use: a wait captures the
// event's state when it is queued, and CUDA frees a destroyed event once it completes.
// No record_stream is needed: each block is used on its own device's current stream (the source
// block's only use off it, the copy on the destination's stream, is fenced by step 5; the
// destination block is written on its current stream). A block allocated on that stream -- every
// temporary of copy_ and every output of to() -- is thus safe to free and reuse; a block used on
// a current stream other than its allocation stream needs record_stream, as for any op (Note
// [Current stream]). PyTorch's copy kernel makes the mirror choice (the copy on the source's
// current stream, the destination waiting before and after); both order the same pairs.
// Same-device and host<->device copies need none of this: they run on the one CUDA side's current
// stream (core/cuda/cuda_backend.cpp, copy_on_stream), after its producers and before its later
// users, and a host side is waited for unless it is pinned (Note [Pinned host memory]).

/// The stream operations a copy between devices is made of. Implementations throw ember::Error
/// when a call fails (destroy_event too; the sequence swallows its errors only while unwinding).
class PeerCopyOps {
 public:
  virtual ~PeerCopyOps() = default;
  /// A new event recorded now on `stream` of cuda:device_index (made current for both calls).
  virtual void* record_event(int device_index, uint64_t stream) const = 0;
  /// Makes `stream` of cuda:device_index wait, on the device, for `event`.
  virtual void wait_event(int device_index, uint64_t stream, void* event) const = 0;
  virtual void destroy_event(void* event) const = 0;
  /// Queues a copy of num_bytes from src on cuda:src_device to dst on cuda:dst_device on
  /// `stream` of cuda:stream_device.
  virtual void copy(void* dst, int dst_device, const void* src, int src_device, size_t num_bytes, int stream_device,
                    uint64_t stream) const = 0;
  /// Blocks the host until `stream` of cuda:device_index has finished its work.
  virtual void synchronize(int device_index, uint64_t stream) const = 0;
};

/// One side of a copy: a device and the stream (its current stream) that orders its block.
struct CopyEnd {
  int device_index = 0;
  uint64_t stream = 0;
};

/// Copies num_bytes from src to dst with the handshake of Note [Copies between devices]; waits for
/// the copy unless `non_blocking`. Does nothing for 0 bytes. Throws what `ops` throws; events
/// already created are destroyed.
void copy_between_devices(const PeerCopyOps& ops, void* dst, CopyEnd dst_end, const void* src, CopyEnd src_end,
                          size_t num_bytes, bool non_blocking);

}  // namespace ember::native::detail
