#include "parallel/comm.h"

#include <algorithm>
#include <sstream>
#include <utility>

#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "parallel/detail/comm_nccl.h"

namespace ember::parallel::comm {
namespace {

void check_devices(const std::vector<Device>& devices, const char* op) {
  EMBER_CHECK_T(ValueError, !devices.empty(), op, ": expected at least one device, got an empty list");
}

// Buckets of tensor indices: same dtype, at most `buffer_bytes` together (a larger tensor gets a
// bucket of its own). Indices keep their order inside a bucket; buckets of different dtypes
// interleave as PyTorch's _take_tensors does.
std::vector<std::vector<size_t>> make_buckets(const std::vector<Tensor>& tensors, size_t buffer_bytes) {
  std::vector<std::vector<size_t>> buckets;
  std::vector<std::pair<DType, size_t>> open;  // dtype -> index of its open bucket
  std::vector<size_t> open_bytes;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    size_t slot = open.size();
    for (size_t k = 0; k < open.size(); ++k) {
      if (open[k].first == t.dtype()) slot = k;
    }
    if (slot == open.size() || (open_bytes[slot] > 0 && open_bytes[slot] + t.nbytes() > buffer_bytes)) {
      buckets.emplace_back();
      if (slot == open.size()) {
        open.emplace_back(t.dtype(), buckets.size() - 1);
        open_bytes.push_back(0);
      } else {
        open[slot].second = buckets.size() - 1;
        open_bytes[slot] = 0;
      }
    }
    buckets[open[slot].second].push_back(i);
    open_bytes[slot] += t.nbytes();
  }
  return buckets;
}

// One flat 1-D contiguous tensor holding the bucket's tensors back to back, on their device.
Tensor flatten_bucket(const std::vector<Tensor>& tensors, const std::vector<size_t>& bucket) {
  int64_t total = 0;
  for (size_t i : bucket) total += tensors[i].numel();
  const Tensor& first = tensors[bucket.front()];
  Tensor flat = empty({total}, TensorOptions(first.dtype()).device(first.device()));
  int64_t off = 0;
  for (size_t i : bucket) {
    const Tensor& t = tensors[i];
    if (t.numel() > 0) {
      Tensor dst = native::view(native::narrow(flat, 0, off, t.numel()), t.sizes());
      native::copy_(dst, t);
    }
    off += t.numel();
  }
  return flat;
}

// Views of `flat` shaped like the bucket's tensors, written into out[i] for i in bucket.
void unflatten_bucket(const Tensor& flat, const std::vector<Tensor>& like, const std::vector<size_t>& bucket,
                      std::vector<Tensor>& out) {
  int64_t off = 0;
  for (size_t i : bucket) {
    const Tensor& t = like[i];
    out[i] = native::view(native::narrow(flat, 0, off, t.numel()), t.sizes());
    off += t.numel();
  }
}

}  // namespace

std::vector<Tensor> broadcast(const Tensor& tensor, const std::vector<Device>& devices) {
  check_devices(devices, "broadcast");
  EMBER_CHECK_T(ValueError, tensor.defined(), "broadcast: the tensor is undefined");
  std::vector<Tensor> out;
  out.reserve(devices.size());
  for (const Device& d : devices) out.push_back(d == tensor.device() ? tensor : native::to(tensor, d));
  return out;
}

std::vector<std::vector<Tensor>> broadcast_coalesced(const std::vector<Tensor>& tensors,
                                                     const std::vector<Device>& devices, size_t buffer_bytes) {
  check_devices(devices, "broadcast_coalesced");
  std::vector<std::vector<Tensor>> out(devices.size());
  if (tensors.empty()) return out;
  for (size_t j = 0; j < tensors.size(); ++j) {
    EMBER_CHECK_T(ValueError, tensors[j].defined(), "broadcast_coalesced: tensor ", j, " is undefined");
    EMBER_CHECK_T(ValueError, tensors[j].device() == tensors[0].device(),
                  "broadcast_coalesced: all tensors must be on one device, but tensor 0 is on ", tensors[0].device(),
                  " and tensor ", j, " on ", tensors[j].device());
  }
  const Device src = tensors[0].device();
  auto buckets = make_buckets(tensors, buffer_bytes);
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i] == src) {
      out[i] = tensors;
      continue;
    }
    out[i].resize(tensors.size());
  }
  const size_t root = static_cast<size_t>(std::find(devices.begin(), devices.end(), src) - devices.begin());
  for (const auto& bucket : buckets) {
    Tensor flat = flatten_bucket(tensors, bucket);
    // All-GPU device lists go through NCCL (Note [NCCL in comm]); the others, and lists NCCL
    // does not work for (Note [NCCL fallback]), copy peer to peer.
    const bool nccl = detail::use_nccl(devices, src, flat.dtype()) && detail::nccl_ready(devices);
    std::vector<Tensor> copies = nccl ? detail::nccl_broadcast(flat, devices, root) : std::vector<Tensor>{};
    for (size_t i = 0; i < devices.size(); ++i) {
      if (devices[i] == src) continue;
      unflatten_bucket(nccl ? copies[i] : native::to(flat, devices[i]), tensors, bucket, out[i]);
    }
  }
  return out;
}

Tensor reduce_add(const std::vector<Tensor>& inputs, std::optional<Device> destination) {
  EMBER_CHECK_T(ValueError, !inputs.empty(), "reduce_add: expected at least one tensor, got an empty list");
  for (size_t i = 0; i < inputs.size(); ++i) {
    EMBER_CHECK_T(ValueError, inputs[i].defined(), "reduce_add: input ", i, " is undefined");
    EMBER_CHECK_T(ValueError, inputs[i].sizes() == inputs[0].sizes(), "reduce_add: input ", i, " has shape ",
                  inputs[i].sizes(), " but input 0 has shape ", inputs[0].sizes());
    EMBER_CHECK_T(TypeError, inputs[i].dtype() == inputs[0].dtype(), "reduce_add: input ", i, " has dtype ",
                  inputs[i].dtype(), " but input 0 has dtype ", inputs[0].dtype());
  }
  Device dst = destination ? *destination : inputs[0].device();
  Tensor result = native::clone(native::to(inputs[0], dst));
  for (size_t i = 1; i < inputs.size(); ++i) native::add_(result, native::to(inputs[i], dst));
  return result;
}

std::vector<Tensor> reduce_add_coalesced(const std::vector<std::vector<Tensor>>& inputs,
                                         std::optional<Device> destination, size_t buffer_bytes) {
  EMBER_CHECK_T(ValueError, !inputs.empty(), "reduce_add_coalesced: expected at least one list of tensors");
  const auto& ref = inputs[0];
  for (size_t i = 0; i < inputs.size(); ++i) {
    EMBER_CHECK_T(ValueError, inputs[i].size() == ref.size(), "reduce_add_coalesced: list ", i, " has ",
                  inputs[i].size(), " tensors but list 0 has ", ref.size());
    for (size_t j = 0; j < ref.size(); ++j) {
      const Tensor& t = inputs[i][j];
      EMBER_CHECK_T(ValueError, t.defined(), "reduce_add_coalesced: tensor ", j, " of list ", i, " is undefined");
      EMBER_CHECK_T(ValueError, t.sizes() == ref[j].sizes() && t.dtype() == ref[j].dtype(),
                    "reduce_add_coalesced: tensor ", j, " of list ", i, " is [", t.dtype(), " ", t.sizes(),
                    "] but in list 0 it is [", ref[j].dtype(), " ", ref[j].sizes(), "]");
      EMBER_CHECK_T(ValueError, t.device() == inputs[i][0].device(), "reduce_add_coalesced: list ", i,
                    " mixes devices ", inputs[i][0].device(), " and ", t.device());
    }
  }
  std::vector<Tensor> out(ref.size());
  if (ref.empty()) return out;
  Device dst = destination ? *destination : ref[0].device();
  std::vector<Device> list_devices;
  for (const auto& list : inputs) list_devices.push_back(list[0].device());
  const size_t root =
      static_cast<size_t>(std::find(list_devices.begin(), list_devices.end(), dst) - list_devices.begin());
  for (const auto& bucket : make_buckets(ref, buffer_bytes)) {
    std::vector<Tensor> flats;
    flats.reserve(inputs.size());
    for (const auto& list : inputs) flats.push_back(flatten_bucket(list, bucket));
    // One list per GPU, the destination among them: an NCCL reduce (Note [NCCL in comm]).
    const bool nccl = detail::use_nccl(list_devices, dst, flats[0].dtype()) && detail::nccl_ready(list_devices);
    unflatten_bucket(nccl ? detail::nccl_reduce_add(flats, list_devices, root) : reduce_add(flats, dst), ref, bucket,
                     out);
  }
  return out;
}

IntList chunk_sizes_for(int64_t size, int64_t num_devices) {
  EMBER_CHECK_T(ValueError, num_devices > 0, "scatter: expected at least one device, got ", num_devices);
  EMBER_CHECK_T(ValueError, size >= 0, "scatter: negative size ", size);
  if (size == 0) return {0};
  int64_t chunk = (size + num_devices - 1) / num_devices;
  IntList sizes;
  for (int64_t off = 0; off < size; off += chunk) sizes.push_back(std::min(chunk, size - off));
  return sizes;
}

std::vector<Tensor> scatter(const Tensor& tensor, const std::vector<Device>& devices,
                            const std::optional<IntList>& chunk_sizes, int64_t dim) {
  check_devices(devices, "scatter");
  EMBER_CHECK_T(ValueError, tensor.defined(), "scatter: the tensor is undefined");
  EMBER_CHECK_T(IndexError, tensor.dim() > 0, "scatter: cannot scatter a 0-dimensional tensor");
  int64_t d = wrap_dim(dim, tensor.dim(), "scatter");
  int64_t n = tensor.sizes()[d];
  IntList sizes = chunk_sizes ? *chunk_sizes : chunk_sizes_for(n, static_cast<int64_t>(devices.size()));
  if (chunk_sizes) {
    int64_t total = 0;
    for (int64_t s : sizes) {
      EMBER_CHECK_T(ValueError, s >= 0, "scatter: chunk sizes must be non-negative, got ", sizes);
      total += s;
    }
    EMBER_CHECK_T(ValueError, !sizes.empty() && sizes.size() <= devices.size(), "scatter: got ", sizes.size(),
                  " chunk sizes for ", devices.size(), " devices");
    EMBER_CHECK_T(ValueError, total == n, "scatter: chunk sizes ", sizes, " sum to ", total, " but the tensor has size ",
                  n, " in dimension ", d);
  }
  std::vector<Tensor> out;
  out.reserve(sizes.size());
  int64_t off = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    Tensor part = native::narrow(tensor, d, off, sizes[i]);
    out.push_back(devices[i] == tensor.device() ? part : native::to(part, devices[i]));
    off += sizes[i];
  }
  return out;
}

Tensor gather(const std::vector<Tensor>& tensors, int64_t dim, std::optional<Device> destination) {
  EMBER_CHECK_T(ValueError, !tensors.empty(), "gather: expected at least one tensor, got an empty list");
  const Tensor& ref = tensors[0];
  for (size_t i = 0; i < tensors.size(); ++i) {
    EMBER_CHECK_T(ValueError, tensors[i].defined(), "gather: the output of replica ", i, " is undefined");
  }
  EMBER_CHECK_T(IndexError, ref.dim() > 0, "gather: cannot gather 0-dimensional tensors along a dimension");
  int64_t d = wrap_dim(dim, ref.dim(), "gather");
  for (size_t i = 1; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    EMBER_CHECK_T(ValueError, t.dim() == ref.dim(), "gather: outputs of replicas have different numbers of dimensions (",
                  ref.sizes(), " on ", ref.device(), " vs ", t.sizes(), " on ", t.device(), ")");
    EMBER_CHECK_T(TypeError, t.dtype() == ref.dtype(), "gather: outputs of replicas have different dtypes (", ref.dtype(),
                  " on ", ref.device(), " vs ", t.dtype(), " on ", t.device(), ")");
    for (int64_t k = 0; k < ref.dim(); ++k) {
      if (k == d || t.sizes()[k] == ref.sizes()[k]) continue;
      EMBER_THROW(ValueError, "gather: outputs of replicas have different sizes in dimension ", k, " (", ref.sizes(),
                  " on ", ref.device(), " vs ", t.sizes(), " on ", t.device(),
                  "). With pack_padded_sequence -> pad_packed_sequence under DataParallel, pass "
                  "total_length=<padded input length> to pad_packed_sequence so every replica returns the same length.");
    }
  }
  Device dst = destination ? *destination : ref.device();
  IntList out_sizes = ref.sizes();
  out_sizes[d] = 0;
  for (const Tensor& t : tensors) out_sizes[d] += t.sizes()[d];
  Tensor out = empty(out_sizes, TensorOptions(ref.dtype()).device(dst));
  int64_t off = 0;
  for (const Tensor& t : tensors) {
    int64_t len = t.sizes()[d];
    if (len > 0 && t.numel() > 0) {
      Tensor slot = native::narrow(out, d, off, len);
      native::copy_(slot, t);  // cross-device: memcpy on CPU, peer copy on CUDA
    }
    off += len;
  }
  return out;
}

}  // namespace ember::parallel::comm
