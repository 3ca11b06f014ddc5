#include "parallel/data_parallel.h"

namespace ember::parallel {

std::vector<Device> default_data_parallel_devices() {
  int n = cuda_device_count();
  if (n == 0) return {Device::cpu(0), Device::cpu(1)};
  std::vector<Device> out;
  for (int i = 0; i < n; ++i) out.push_back(Device::cuda(i));
  return out;
}

namespace detail {
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
