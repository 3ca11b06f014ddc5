// How the DataLoader's pin_memory=true puts batches in pinned host memory (Note [Pinned
// batches]): the decision made once per loader, and the walk over one batch. Pinning itself is
// core's (Tensor::pin_memory, Note [Pinned host memory] in core/pinned_memory.cpp). Stateless
// apart from a warn-once flag; thread-safe.
#pragma once
#include <concepts>

#include "core/nested.h"
#include "core/ops/native.h"
#include "core/tensor.h"

namespace ember::data::detail {

// Note [Pinned batches]
// With pin_memory=true every tensor of a batch is copied into pinned host memory in the process
// that iterates, after the batch has been made (num_workers == 0) or received from a worker and
// rebuilt over shared memory (num_workers > 0); the shared-memory segment is released when the
// batch's views of it go away, right after the copy. The batch is walked with map_tensors
// (core/nested.h), so vectors, tuples, maps, optionals and NestedTensors types such as
// PackedSequence are pinned through; a batch type with its own `pin_memory()` member (as in
// PyTorch's custom batches) is pinned by calling it; other leaves, undefined tensors and tensors
// not on the CPU are left as they are.
//
// No pin thread. PyTorch pins in a separate thread so that the Python main thread keeps running
// the training step meanwhile. Here pinning a batch is one memcpy per tensor, bound by memory
// bandwidth (a 64 MiB batch is a few milliseconds), which is small beside a training step, and
// it runs only when the consumer asks for the next batch, so a thread would save at most that
// copy per step. It would cost a second queue between the workers and the consumer with its own
// timeout, error and shutdown paths, and a parent thread alive across the fork of persistent
// workers. If profiles ever show the copy, the place to overlap it is here: pin batch i+1 on a
// helper thread while batch i is consumed.
//
// Without a CUDA device (CPU-only build or machine) pinned memory does not exist. PyTorch then
// warns and yields ordinary batches, so that one training script runs on GPU and CPU machines;
// ember does the same: the loader delivers pageable batches, DataLoader::pins_memory() says
// false, and one line on stderr per process says why. Calling Tensor::pin_memory() directly
// without a device is a DeviceError instead: there the caller asked for pinned memory itself.

/// Whether a loader with pin_memory=`requested` pins its batches: requested and pinned memory
/// available (core's pinned_memory_available()). Requested but unavailable: false, and a warning
/// on stderr, once per process.
bool pin_memory_enabled(bool requested);

/// `batch` with every CPU tensor in pinned memory (see Note [Pinned batches]).
template <class Batch>
Batch pin_batch(const Batch& batch) {
  // Tensor's own pin_memory() member lives in ember_autograd, which data may not use.
  if constexpr (!nested::TensorValue<Batch> && requires { { batch.pin_memory() } -> std::convertible_to<Batch>; }) {
    return batch.pin_memory();
  } else {
    return map_tensors(batch, [](const Tensor& t) {
      return t.defined() && t.device().is_cpu() ? native::pin_memory(t) : t;
    });
  }
}

}  // namespace ember::data::detail
