// Multi-tensor launches (Note [Multi-tensor launches]): one kernel over a list of tensors through
// a chunk table, for the optimizer updates, the gradient norm and its scaling. Header-only, no
// CUDA headers: the CUDA launchers (core/kernels/cuda/multi_tensor.cu) and the CPU tests, on an
// emulated launch grid, run the same MultiTensorKernel. Thread-safe (pure).
#pragma once
#include <cstdint>
#include <vector>

#include "core/kernels/launch.h"
#include "core/macros.h"

namespace ember::kernels {

// Note [Multi-tensor launches]
// An optimizer step or clip_grad_norm_ touches every parameter; one launch per tensor costs a
// launch each (tens of microseconds for a model of many small tensors). Instead the host builds
//  * one MultiTensorEntry per tensor: up to kMultiTensorLists element pointers of the same
//    numel (param, grad, exp_avg, ...; null for a list not used), the numel, and two per-tensor
//    scalars (Adam: -lr / bias_correction1 and sqrt(bias_correction2) of that tensor's step);
//  * a chunk table: tensor t is cut into chunks of at most `chunk` elements, entry
//    {t, begin, len} each, in tensor order;
// copies both to device memory in one copy and launches MultiTensorKernel: block b takes chunks
// b, b + gridDim.x, ... and its threads stride over the chunk's elements, calling the per-element
// op (op(entry, i), i the element index within the tensor). The ops are the same host/device
// functors as the per-tensor CPU kernels (core/kernels/optim.h, core/kernels/norm.h), so a CUDA
// step computes what the CPU step computes, element for element.
// The norm does not launch MultiTensorKernel: it reduces NormTermF over the virtual index space
// chunk * chunk_elems + j (lanes past a chunk's end give the reduction's identity) with CUB.
// The CPU norm (core/kernels/cpu/norm.cpp) takes its chunks from the same table, with its own
// chunk size (kNormChunk).

constexpr int kMultiTensorLists = 5;
/// Elements per chunk of a launch (a block's work per pass).
constexpr int64_t kMultiTensorChunk = 16384;

struct MultiTensorEntry {
  void* ptr[kMultiTensorLists] = {nullptr, nullptr, nullptr, nullptr, nullptr};
  int64_t numel = 0;
  double arg[2] = {0.0, 0.0};  // per-tensor scalars, meaning set by the op
  int32_t is_f64 = 0;          // the norm's element type: float64 (1) or float32 (0)
};

struct MultiTensorChunk {
  int64_t tensor = 0;  // index into the entries
  int64_t begin = 0;   // first element of the chunk within the tensor
  int64_t len = 0;     // 1..chunk elements
};

/// The chunks of `entries` (tensors of numel 0 have none), each at most `chunk` elements.
inline std::vector<MultiTensorChunk> multi_tensor_chunks(const std::vector<MultiTensorEntry>& entries,
                                                         int64_t chunk = kMultiTensorChunk) {
  std::vector<MultiTensorChunk> out;
  for (size_t t = 0; t < entries.size(); ++t) {
    for (int64_t b = 0; b < entries[t].numel; b += chunk) {
      const int64_t left = entries[t].numel - b;
      out.push_back(MultiTensorChunk{static_cast<int64_t>(t), b, left < chunk ? left : chunk});
    }
  }
  return out;
}

/// Runs op(entries[c.tensor], c.begin + j) for every chunk c and j < c.len: blocks stride over
/// chunks, threads over a chunk's elements. Op: `EMBER_HOST_DEVICE void operator()(const
/// MultiTensorEntry&, int64_t) const`.
template <typename Op>
struct MultiTensorKernel {
  Op op;
  const MultiTensorEntry* entries;
  const MultiTensorChunk* chunks;
  int64_t num_chunks;
  EMBER_HOST_DEVICE void operator()(const LaunchIndex& ix) const {
    for (int64_t c = ix.block_idx.x; c < num_chunks; c += ix.grid_dim.x) {
      const MultiTensorChunk ch = chunks[c];
      const MultiTensorEntry& e = entries[ch.tensor];
      for (int64_t j = ix.thread_idx.x; j < ch.len; j += ix.block_dim.x) op(e, ch.begin + j);
    }
  }
};

/// One block per chunk up to max_blocks (then blocks stride), `threads` per block.
inline LaunchConfig multi_tensor_config(const char* name, int64_t num_chunks, unsigned threads = kLaunchThreads,
                                        int64_t max_blocks = kMaxLaunchBlocks) {
  LaunchConfig cfg;
  int64_t blocks = num_chunks < 1 ? 1 : num_chunks;
  if (blocks > max_blocks) blocks = max_blocks;
  cfg.grid.x = static_cast<unsigned>(blocks);
  cfg.block.x = threads;
  cfg.name = name;
  return cfg;
}

/// x *= scale for every element of list 0 (float32 or float64 per entry.is_f64), as the CPU's
/// scale_inplace rounds it (the scale cast to the element type first).
struct ScaleMultiF {
  double scale;
  EMBER_HOST_DEVICE EMBER_FORCE_INLINE void operator()(const MultiTensorEntry& e, int64_t i) const {
    if (e.is_f64) {
      static_cast<double*>(e.ptr[0])[i] *= scale;
    } else {
      static_cast<float*>(e.ptr[0])[i] *= static_cast<float>(scale);
    }
  }
};

}  // namespace ember::kernels
