#include "parallel/replicate_parameters.h"

#include <memory>

#include "core/error.h"

namespace ember::parallel::detail {

Tensor alias_on_cpu_device(const Tensor& t, Device device) {
  EMBER_INTERNAL_ASSERT(t.device().is_cpu() && device.is_cpu(), "alias_on_cpu_device: ", t.device(), " -> ", device);
  const Storage& from = t.storage();
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = Storage::from_external(from.data(), from.num_bytes(), device, [keep = from](void*) {});
  impl->sizes = t.sizes();
  impl->strides = t.impl()->strides;
  impl->offset = t.impl()->offset;
  impl->dtype = t.dtype();
  impl->version = t.impl()->version;
  impl->refresh();
  return Tensor(std::move(impl));
}

ReplicaParametersGuard::ReplicaParametersGuard(const ParameterCopies* copies, bool share_cpu)
    : source_([copies, share_cpu](const Tensor& original, Device device) -> Tensor {
        if (share_cpu && device.is_cpu() && original.device().is_cpu()) return alias_on_cpu_device(original, device);
        if (copies == nullptr) return Tensor();
        const auto it = copies->find(original.impl());
        if (it == copies->end() || !it->second.defined() || it->second.device() != device) return Tensor();
        return it->second;
      }) {}

}  // namespace ember::parallel::detail
