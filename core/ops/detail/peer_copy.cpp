// The handshake of Note [Copies between devices] (core/ops/detail/peer_copy.h).
#include "core/ops/detail/peer_copy.h"

namespace ember::native::detail {
namespace {

// Owns one event of `ops`: release() destroys it and reports a failure; the destructor destroys
// one still held (only while unwinding from another error, whose report it must not replace).
class OwnedEvent {
 public:
  OwnedEvent(const PeerCopyOps& ops, void* event) : ops_(ops), event_(event) {}
  ~OwnedEvent() {
    if (event_ == nullptr) return;
    try {
      ops_.destroy_event(event_);
    } catch (...) {  // the error in flight is the one to report
    }
  }
  OwnedEvent(const OwnedEvent&) = delete;
  OwnedEvent& operator=(const OwnedEvent&) = delete;
  void* get() const { return event_; }
  void release() {
    void* e = event_;
    event_ = nullptr;
    ops_.destroy_event(e);
  }

 private:
  const PeerCopyOps& ops_;
  void* event_;
};

}  // namespace

void copy_between_devices(const PeerCopyOps& ops, void* dst, CopyEnd dst_end, const void* src, CopyEnd src_end,
                          size_t num_bytes, bool non_blocking) {
  if (num_bytes == 0) return;
  OwnedEvent source_ready(ops, ops.record_event(src_end.device_index, src_end.stream));
  ops.wait_event(dst_end.device_index, dst_end.stream, source_ready.get());
  ops.copy(dst, dst_end.device_index, src, src_end.device_index, num_bytes, dst_end.device_index, dst_end.stream);
  OwnedEvent copied(ops, ops.record_event(dst_end.device_index, dst_end.stream));
  ops.wait_event(src_end.device_index, src_end.stream, copied.get());
  source_ready.release();
  copied.release();
  if (!non_blocking) ops.synchronize(dst_end.device_index, dst_end.stream);
}

}  // namespace ember::native::detail
