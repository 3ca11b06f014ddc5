// CUDA launchers of the multi-tensor ops (Note [Multi-tensor launches] in
// core/kernels/multi_tensor.h): the optimizer updates and the gradient scaling run
// MultiTensorKernel over the functors of core/kernels/optim.h and core/kernels/multi_tensor.h;
// the gradient norm reduces core/kernels/norm.h's NormTermF over every tensor with one CUB
// reduction. Each copies its chunk table to the device in one copy on the current stream.
#include <cub/device/device_reduce.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <cstring>
#include <vector>

#include "core/allocator.h"
#include "core/cuda/cuda_device.h"
#include "core/kernels/cuda/kernels.h"
#include "core/kernels/cuda/launch.cuh"
#include "core/kernels/multi_tensor.h"
#include "core/kernels/norm.h"
#include "core/kernels/optim.h"

namespace ember::cuda {
namespace {
using kernels::MultiTensorChunk;
using kernels::MultiTensorEntry;

// The chunk table in device memory: entries, then chunks, in one block of the caching allocator.
// The block is freed when the launcher returns; it was allocated on the current stream, so the
// allocator hands it out again only to work queued after this launch (Note [Stream-aware frees]).
struct DeviceTable {
  DataPtr memory;
  const MultiTensorEntry* entries = nullptr;
  const MultiTensorChunk* chunks = nullptr;
  int64_t num_chunks = 0;
};

DeviceTable upload(const MultiTensorEntry* entries, int64_t n, int64_t chunk_elems, int device_index) {
  const std::vector<MultiTensorEntry> host_entries(entries, entries + n);
  const std::vector<MultiTensorChunk> chunks = kernels::multi_tensor_chunks(host_entries, chunk_elems);
  DeviceTable t;
  t.num_chunks = static_cast<int64_t>(chunks.size());
  if (chunks.empty()) return t;
  static_assert(sizeof(MultiTensorEntry) % alignof(MultiTensorChunk) == 0);
  const size_t entry_bytes = host_entries.size() * sizeof(MultiTensorEntry);
  const size_t chunk_bytes = chunks.size() * sizeof(MultiTensorChunk);
  std::vector<unsigned char> staging(entry_bytes + chunk_bytes);
  std::memcpy(staging.data(), host_entries.data(), entry_bytes);
  std::memcpy(staging.data() + entry_bytes, chunks.data(), chunk_bytes);
  t.memory = get_allocator(Device::cuda(device_index))->allocate(staging.size());
  auto* base = static_cast<unsigned char*>(t.memory.get());
  // From pageable memory: the call returns once the bytes are staged, so `staging` may go.
  EMBER_CUDA_CHECK(cudaMemcpyAsync(base, staging.data(), staging.size(), cudaMemcpyHostToDevice,
                                   current_stream(device_index)));
  t.entries = reinterpret_cast<const MultiTensorEntry*>(base);
  t.chunks = reinterpret_cast<const MultiTensorChunk*>(base + entry_bytes);
  return t;
}

template <typename Op>
void launch_multi(const char* name, const Op& op, const MultiTensorEntry* entries, int64_t n, int device_index) {
  CudaDeviceGuard guard(device_index);
  const DeviceTable t = upload(entries, n, kernels::kMultiTensorChunk, device_index);
  if (t.num_chunks == 0) return;
  launch(kernels::multi_tensor_config(name, t.num_chunks),
         kernels::MultiTensorKernel<Op>{op, t.entries, t.chunks, t.num_chunks}, current_stream(device_index));
}

template <typename T, bool kCoupled, bool kAmsgrad>
void adam_typed(const kernels::AdamArgs& a, const MultiTensorEntry* entries, int64_t n, int device_index) {
  using Op = kernels::AdamMultiF<T, kCoupled, kAmsgrad>;
  launch_multi("multi_tensor_adam", Op{kernels::make_adam_step<T, kCoupled, kAmsgrad>(a)}, entries, n, device_index);
}

}  // namespace

void multi_tensor_adam(DType dtype, const kernels::AdamArgs& a, const MultiTensorEntry* entries, int64_t n,
                       int device_index) {
  const bool coupled = !a.decoupled && a.weight_decay != 0.0;
  const bool amsgrad = n > 0 && entries[0].ptr[4] != nullptr;
  EMBER_DISPATCH_FLOATING(dtype, "adam_update_", [&] {
    using T = scalar_t;
    if (coupled) {
      amsgrad ? adam_typed<T, true, true>(a, entries, n, device_index)
              : adam_typed<T, true, false>(a, entries, n, device_index);
    } else {
      amsgrad ? adam_typed<T, false, true>(a, entries, n, device_index)
              : adam_typed<T, false, false>(a, entries, n, device_index);
    }
  });
}

void multi_tensor_sgd(DType dtype, const kernels::SgdArgs& a, bool has_buf, const MultiTensorEntry* entries,
                      int64_t n, int device_index) {
  EMBER_DISPATCH_FLOATING(dtype, "sgd_update_", [&] {
    launch_multi("multi_tensor_sgd", kernels::SgdMultiF<scalar_t>{kernels::make_sgd_step<scalar_t>(a, has_buf, false)},
                 entries, n, device_index);
  });
}

void multi_tensor_scale(const MultiTensorEntry* entries, int64_t n, double scale, int device_index) {
  launch_multi("multi_tensor_scale", kernels::ScaleMultiF{scale}, entries, n, device_index);
}

double multi_tensor_norm(const MultiTensorEntry* entries, int64_t n, double p, int device_index) {
  const kernels::NormReduce kind = kernels::norm_reduce_kind(p);
  const double identity = kernels::norm_identity(kind);
  CudaDeviceGuard guard(device_index);
  const int64_t chunk_elems = kernels::kMultiTensorChunk;
  const DeviceTable t = upload(entries, n, chunk_elems, device_index);
  if (t.num_chunks == 0) return identity;
  const cudaStream_t stream = current_stream(device_index);
  const auto terms = thrust::make_transform_iterator(
      thrust::counting_iterator<int64_t>(0), kernels::NormTermF{t.entries, t.chunks, chunk_elems, p, kind});
  const int64_t lanes = t.num_chunks * chunk_elems;
  const kernels::NormCombineF combine{kind};
  Allocator* alloc = get_allocator(Device::cuda(device_index));
  DataPtr result = alloc->allocate(sizeof(double));
  auto* out = static_cast<double*>(result.get());
  size_t temp_bytes = 0;
  EMBER_CUDA_CHECK(cub::DeviceReduce::Reduce(nullptr, temp_bytes, terms, out, lanes, combine, identity, stream));
  DataPtr temp = alloc->allocate(temp_bytes);
  EMBER_CUDA_CHECK(cub::DeviceReduce::Reduce(temp.get(), temp_bytes, terms, out, lanes, combine, identity, stream));
  detail::after_launch("multi_tensor_norm", stream);
  double host = 0.0;
  EMBER_CUDA_CHECK(cudaMemcpyAsync(&host, out, sizeof(double), cudaMemcpyDeviceToHost, stream));
  EMBER_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host;
}

}  // namespace ember::cuda
