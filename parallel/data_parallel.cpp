#include "parallel/data_parallel.h"

#include <string>

#include "core/device.h"
#include "core/error.h"

// Note [DataParallel shards]
// DataParallelOptions::deterministic gives the same bits for any device list, and, with
// average_shards, the same bits as DistributedDataParallel's deterministic option and a
// group-less DeterministicReducer over the same shards (Note [World-size invariance] in
// deterministic_reducer.cpp):
//  * each call's batch is cut into num_shards equal shards (a property of the job, not of the
//    device count), and every shard is its own replica: replicate() lists shard s's device,
//    devices[s * D / num_shards], once per shard, so a device holding three shards runs three
//    replicas, each on its own replica thread (Note [Replica threads]). A shard's forward and
//    backward see the same inputs and shapes wherever it runs, and the kernels do not depend on
//    the thread count (docs/DETERMINISM.md), so its gradient is the same bits;
//  * the replicas' gradients of a parameter meet in its BroadcastBackward node, which sums them
//    exactly (ReplicateOptions::exact_sum_divisor: each term rounded on its own to int64
//    multiples of 2^-E with E from the largest |element| and num_shards, integers added, one
//    conversion back) instead of in device-list order, so the grouping of shards over devices
//    does not show in the bits;
//  * outputs are gathered in shard order, so the loss over them is computed as with one device.
// A parameter used by a shard several times has its uses summed by the engine inside that
// shard's backward (one replica, one graph), as in a one-process run of the shard.

namespace ember::parallel {

std::vector<Device> default_data_parallel_devices() {
  int n = cuda_device_count();
  if (n == 0) return {Device::cpu(0), Device::cpu(1)};
  std::vector<Device> out;
  for (int i = 0; i < n; ++i) out.push_back(Device::cuda(i));
  return out;
}

namespace detail {
void check_data_parallel_devices(const std::vector<Device>& devices, const std::optional<Device>& output_device) {
  EMBER_CHECK_T(ValueError, !devices.empty(),
                "DataParallel: device_ids is empty (expected at least one device, or no list for the default: "
                "all CUDA devices, else cpu:0 and cpu:1)");
  for (size_t i = 1; i < devices.size(); ++i) {
    EMBER_CHECK_T(ValueError, devices[i].type == devices[0].type,
                  "DataParallel: device_ids must be all CPU or all CUDA devices, but device_ids[0] is ", devices[0],
                  " and device_ids[", i, "] is ", devices[i]);
  }
  for (size_t i = 0; i < devices.size(); ++i) {
    check_device_exists(devices[i], "DataParallel: device_ids[" + std::to_string(i) + "]");
  }
  if (output_device) check_device_exists(*output_device, "DataParallel: output_device");
}

void check_deterministic_options(int64_t num_shards) {
  EMBER_CHECK_T(ValueError, num_shards >= 1 && num_shards <= (int64_t{1} << 20),
                "DataParallel(deterministic): num_shards must be between 1 and 2^20, got ", num_shards,
                "; it is the job's number of shards per batch, the same for every device list");
}

std::vector<Device> shard_devices(const std::vector<Device>& devices, int64_t num_shards) {
  std::vector<Device> out;
  out.reserve(static_cast<size_t>(num_shards));
  const auto d = static_cast<int64_t>(devices.size());
  for (int64_t s = 0; s < num_shards; ++s) out.push_back(devices[static_cast<size_t>(s * d / num_shards)]);
  return out;
}

void check_shard_batch(const BatchProbe& p, int64_t num_shards) {
  EMBER_CHECK_T(ValueError, p.size > 0 && p.size % num_shards == 0, "DataParallel(deterministic): the batch has ",
                p.size < 0 ? std::string("no tensor argument") : std::to_string(p.size) + " samples (" + p.first + ")",
                "; expected a positive multiple of num_shards ", num_shards, " (every shard holds the same number)");
}

void check_module_on_device(const nn::Module& module, Device device) {
  auto check = [&](const Tensor& t) {
    EMBER_CHECK_T(ValueError, t.device() == device, "module must have its parameters and buffers on device ", device,
                  " (device_ids[0]) but found one of them on device: ", t.device());
  };
  for (const auto& p : module.parameters()) check(p);
  for (const auto& b : module.buffers()) check(b);
}
}  // namespace detail

}  // namespace ember::parallel
