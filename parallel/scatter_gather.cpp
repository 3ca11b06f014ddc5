#include "parallel/scatter_gather.h"

#include <memory>
#include <sstream>

#include "core/profiler.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"

namespace ember::parallel {

namespace detail {
void BatchProbe::add(const Tensor& t, int64_t dim, const std::string& where) {
  EMBER_CHECK_T(IndexError, t.dim() > 0, "scatter: ", where, " is a 0-dimensional tensor; it cannot be split into a batch");
  int64_t d = wrap_dim(dim, t.dim(), "scatter");
  int64_t n = t.sizes()[d];
  std::ostringstream desc;
  desc << where << " (shape " << t.sizes() << ", scatter dim " << d << ")";
  if (size < 0) {
    size = n;
    first = desc.str();
    return;
  }
  EMBER_CHECK_T(ValueError, n == size, "scatter: every tensor argument must have the same batch size along its scatter "
                "dim, but ", first, " has ", size, " and ", desc.str(), " has ", n,
                "; set scatter_dims so each argument is split along its batch dimension");
}
}  // namespace detail

namespace {
// Where scatter's chunk i came from: its size along the dim and its device.
struct ChunkMeta {
  IntList sizes;
  Device device;
};
}  // namespace

std::vector<Tensor> scatter(const Tensor& input, const std::vector<Device>& devices, int64_t dim,
                            const std::optional<IntList>& chunk_sizes) {
  EMBER_PROFILE_SCOPE("DataParallel.scatter", kDataParallel);
  EMBER_CHECK_T(ValueError, input.defined(), "scatter: the input tensor is undefined");
  EMBER_CHECK_T(IndexError, input.dim() > 0, "scatter: cannot scatter a 0-dimensional tensor");
  int64_t d = wrap_dim(dim, input.dim(), "scatter");
  std::vector<Tensor> outs = comm::scatter(input, devices, chunk_sizes, d);
  // Chunks left on the input's device are views: give them their own memory, so a replica's
  // in-place op can never write into the caller's batch and the outputs below are plain tensors.
  for (auto& o : outs) {
    if (o.device() == input.device()) o = native::clone(o);
  }
  if (!autograd::any_requires_grad({&input})) return outs;
  std::vector<ChunkMeta> metas;
  for (const auto& o : outs) metas.push_back({o.sizes(), o.device()});
  auto node = std::make_shared<autograd::FunctionNode>(
      "ScatterBackward", [metas, d, src = input.device(), dt = input.dtype()](autograd::FunctionNode&,
                                                                             autograd::TensorList& g) {
        std::vector<Tensor> parts;
        parts.reserve(metas.size());
        for (size_t i = 0; i < metas.size(); ++i) {
          bool have = i < g.size() && g[i].defined();
          parts.push_back(have ? g[i] : zeros(metas[i].sizes, TensorOptions(dt).device(metas[i].device)));
        }
        return autograd::TensorList{comm::gather(parts, d, src)};
      });
  std::vector<Tensor*> out_ptrs;
  for (auto& o : outs) out_ptrs.push_back(&o);
  autograd::set_history(node, std::vector<const Tensor*>{&input}, out_ptrs);
  return outs;
}

std::vector<std::vector<Tensor>> scatter(const std::vector<Tensor>& inputs, const std::vector<Device>& devices,
                                         const IntList& dims, const std::optional<IntList>& chunk_sizes) {
  EMBER_CHECK_T(ValueError, !devices.empty(), "scatter: expected at least one device, got an empty list");
  ScatterSpec spec{dims, 0, chunk_sizes};
  detail::BatchProbe p;
  for (size_t j = 0; j < inputs.size(); ++j) {
    EMBER_CHECK_T(ValueError, inputs[j].defined(), "scatter: input ", j, " is undefined");
    p.add(inputs[j], spec.dim_for(j), "input " + std::to_string(j));
  }
  if (inputs.empty()) return {};
  IntList sizes = chunk_sizes ? *chunk_sizes : comm::chunk_sizes_for(p.size, static_cast<int64_t>(devices.size()));
  std::vector<std::vector<Tensor>> out(sizes.size(), std::vector<Tensor>(inputs.size()));
  for (size_t j = 0; j < inputs.size(); ++j) {
    auto parts = scatter(inputs[j], devices, spec.dim_for(j), sizes);
    for (size_t i = 0; i < parts.size(); ++i) out[i][j] = std::move(parts[i]);
  }
  return out;
}

Tensor gather(const std::vector<Tensor>& outputs, Device device, int64_t dim) {
  EMBER_PROFILE_SCOPE("DataParallel.gather", kDataParallel);
  EMBER_CHECK_T(ValueError, !outputs.empty(), "gather: expected the outputs of at least one replica");
  size_t scalars = 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    EMBER_CHECK_T(ValueError, outputs[i].defined(), "gather: the output of replica ", i, " is undefined");
    if (outputs[i].dim() == 0) ++scalars;
  }
  if (scalars == outputs.size()) {
    // As PyTorch: scalars (e.g. each replica's loss) are unsqueezed and returned as a vector.
    std::vector<Tensor> vecs;
    for (const auto& o : outputs) vecs.push_back(ember::unsqueeze(o, 0));
    return gather(vecs, device, 0);
  }
  EMBER_CHECK_T(ValueError, scalars == 0, "gather: some replicas returned 0-dimensional tensors and others did not");
  int64_t d = wrap_dim(dim, outputs[0].dim(), "gather");
  Tensor out = comm::gather(outputs, d, device);
  bool need = false;
  for (const auto& o : outputs) need = need || o.requires_grad();
  if (!need || !autograd::GradMode::is_enabled()) return out;
  std::vector<ChunkMeta> metas;
  for (const auto& o : outputs) metas.push_back({o.sizes(), o.device()});
  auto node = std::make_shared<autograd::FunctionNode>(
      "GatherBackward", [metas, d](autograd::FunctionNode& n, autograd::TensorList& g) {
        autograd::TensorList r(metas.size());
        int64_t off = 0;
        for (size_t i = 0; i < metas.size(); ++i) {
          int64_t len = metas[i].sizes[d];
          if (n.needs_input_grad(i) && g[0].defined()) {
            Tensor part = native::narrow(g[0], d, off, len);
            r[i] = part.device() == metas[i].device ? native::contiguous(part) : native::to(part, metas[i].device);
          }
          off += len;
        }
        return r;
      });
  std::vector<const Tensor*> ins;
  for (const auto& o : outputs) ins.push_back(&o);
  autograd::set_history(node, ins, std::vector<Tensor*>{&out});
  return out;
}

}  // namespace ember::parallel
