#include "parallel/distributed/detail/host_staging.h"

#include "core/ops/native.h"
#include "core/stream.h"

// Note [Host staging]
// The tcp backend's ring algorithms read and write host memory. A collective over CUDA tensors
// (DDP's gradient buckets on a GPU rank, GradScaler's found-inf flag) is staged: the caller's
// thread first waits for its current stream on each of those devices (wait_for_producers: the
// kernels that computed the values may still be running, and the worker's copies run on its
// own stream), then the worker copies each tensor to the host (host_copies), runs the collective
// on the copies and copies the results back, waiting until they have landed (copy_back), before
// it completes the Work. Because the worker runs operations one at a time in call order, an
// operation's copies to the host happen after the previous operation's copies back: two
// collectives queued on one tensor without a wait in between see each other's results, as they
// do on CPU tensors. CPU tensors are not copied, so the CPU path is unchanged. The price is a host
// wait in the caller for each staged operation (no overlap of backward with the GPU's queue) and
// two copies through pageable memory: a path that lets a GPU job run where NCCL cannot (a
// two-rank job on one GPU, which NCCL refuses), not a fast one; nccl is the GPU backend.
// send/recv are not staged (the tcp backend rejects CUDA tensors there).

namespace ember::parallel::detail {

bool needs_staging(const std::vector<Tensor>& tensors) {
  for (const Tensor& t : tensors) {
    if (!t.device().is_cpu()) return true;
  }
  return false;
}

void wait_for_producers(const std::vector<Tensor>& tensors) {
  std::vector<Device> done;
  for (const Tensor& t : tensors) {
    const Device d = t.device();
    if (d.is_cpu()) continue;
    bool seen = false;
    for (const Device& e : done) seen = seen || e == d;
    if (seen) continue;
    current_stream(d).synchronize();
    done.push_back(d);
  }
}

std::vector<Tensor> host_copies(const std::vector<Tensor>& tensors) {
  std::vector<Tensor> host;
  host.reserve(tensors.size());
  for (const Tensor& t : tensors) host.push_back(t.device().is_cpu() ? t : native::to(t, Device::cpu()));
  return host;
}

void copy_back(const std::vector<Tensor>& tensors, const std::vector<Tensor>& host) {
  std::vector<Device> touched;
  for (size_t i = 0; i < tensors.size() && i < host.size(); ++i) {
    if (tensors[i].device().is_cpu()) continue;
    Tensor dst = tensors[i];
    native::copy_(dst, host[i]);
    touched.push_back(dst.device());
  }
  for (const Device& d : touched) current_stream(d).synchronize();
}

}  // namespace ember::parallel::detail
