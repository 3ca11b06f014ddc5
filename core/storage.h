// Storage: a reference-counted block of device memory that tensors and their views share.
// The memory comes from the device's caching allocator, or from outside (from_blob: shared
// memory batches, mmap'd files) with a caller-supplied deleter, or from another allocator
// (pinned host memory: core/pinned_memory.h). Thread-compatible.
#pragma once
#include <functional>
#include <memory>

#include "core/allocator.h"

namespace ember {

struct StorageImpl {
  DataPtr data;
  size_t num_bytes = 0;
  StorageImpl(DataPtr d, size_t n) : data(std::move(d)), num_bytes(n) {}
};

class Storage {
 public:
  Storage() = default;
  /// Allocates num_bytes on `device` through its caching allocator.
  Storage(size_t num_bytes, Device device);
  /// Takes `data` (e.g. a block of pinned_allocator()); its deleter runs when the last tensor
  /// using it goes away.
  Storage(DataPtr data, size_t num_bytes);
  /// Wraps memory owned elsewhere; `deleter` runs when the last tensor using it goes away.
  static Storage from_external(void* data, size_t num_bytes, Device device,
                               std::function<void(void*)> deleter);

  void* data() const { return impl_ ? impl_->data.get() : nullptr; }
  /// The owning pointer (its deleter says which allocator the memory belongs to). Needs defined().
  const DataPtr& data_ptr() const { return impl_->data; }
  /// True for CPU memory from a pinned allocator (Note [Pinned host memory]).
  bool is_pinned() const;
  size_t num_bytes() const { return impl_ ? impl_->num_bytes : 0; }
  Device device() const { return impl_->data.device(); }
  bool defined() const { return impl_ != nullptr; }
  bool is_same(const Storage& o) const { return impl_ == o.impl_; }
  long use_count() const { return impl_.use_count(); }

 private:
  std::shared_ptr<StorageImpl> impl_;
};

}  // namespace ember
