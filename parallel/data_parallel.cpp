#include "parallel/data_parallel.h"

#include <string>

#include "core/device.h"
#include "core/error.h"

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
