#include "core/storage.h"

#include "core/pinned_memory.h"

namespace ember {

Storage::Storage(size_t num_bytes, Device device)
    : impl_(std::make_shared<StorageImpl>(get_allocator(device)->allocate(num_bytes), num_bytes)) {}

Storage::Storage(DataPtr data, size_t num_bytes) : impl_(std::make_shared<StorageImpl>(std::move(data), num_bytes)) {}

bool Storage::is_pinned() const { return impl_ != nullptr && PinnedAllocator::owner_of(impl_->data) != nullptr; }

namespace {
struct ExternalCtx {
  std::function<void(void*)> deleter;
};
void external_delete(void* ctx, void* ptr) {
  auto* c = static_cast<ExternalCtx*>(ctx);
  if (c->deleter) c->deleter(ptr);
  delete c;
}
}  // namespace

Storage Storage::from_external(void* data, size_t num_bytes, Device device, std::function<void(void*)> deleter) {
  Storage s;
  auto* ctx = new ExternalCtx{std::move(deleter)};
  s.impl_ = std::make_shared<StorageImpl>(DataPtr(data, ctx, &external_delete, device), num_bytes);
  return s;
}

}  // namespace ember
