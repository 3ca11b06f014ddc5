#include "core/device.h"

#include <charconv>

#include "core/config.h"
#include "core/cuda/cuda_backend.h"
#include "core/error.h"

namespace ember {

Device::Device(std::string_view spec) {
  std::string_view kind = spec;
  int idx = 0;
  auto colon = spec.find(':');
  if (colon != std::string_view::npos) {
    kind = spec.substr(0, colon);
    auto num = spec.substr(colon + 1);
    auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), idx);
    EMBER_CHECK_T(ValueError, ec == std::errc() && p == num.data() + num.size() && !num.empty() && idx >= 0,
                  "Device: expected a device string like \"cpu\", \"cpu:1\" or \"cuda:0\", got \"", spec, "\"");
  }
  if (kind == "cpu") {
    type = DeviceType::CPU;
  } else if (kind == "cuda") {
    type = DeviceType::CUDA;
  } else {
    EMBER_THROW(ValueError, "Device: expected a device string like \"cpu\", \"cpu:1\" or \"cuda:0\", got \"", spec,
                "\"");
  }
  EMBER_CHECK_T(ValueError, idx < kMaxDevicesPerType, "Device: index ", idx, " in \"", spec,
                "\" is out of range (at most ", kMaxDevicesPerType - 1, ")");
  index = idx;
}

std::string Device::str() const { return std::string(is_cpu() ? "cpu:" : "cuda:") + std::to_string(index); }

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

#if !EMBER_HAVE_CUDA
// With CUDA these live in core/cuda (cuda_device.cpp, cuda_backend.cpp).
int cuda_device_count() { return 0; }
namespace detail {
void register_cuda_backend() {}
}  // namespace detail
#endif
bool cuda_is_available() { return cuda_device_count() > 0; }

void check_device_exists(Device device, std::string_view op) {
  if (device.is_cpu()) {
    EMBER_CHECK_T(DeviceError, device.index >= 0 && device.index < kMaxDevicesPerType, op, ": ", device,
                  " does not exist (logical CPU devices are cpu:0 to cpu:", kMaxDevicesPerType - 1, ")");
    return;
  }
  const int count = cuda_device_count();
  if (device.index >= 0 && device.index < count) [[likely]]
    return;
  if (!EMBER_HAVE_CUDA)
    EMBER_THROW(DeviceError, op, ": ", device, " is not available: ember was built without CUDA, so no CUDA "
                "device exists (configure with -DEMBER_CUDA=ON)");
  if (count == 0)
    EMBER_THROW(DeviceError, op, ": ", device, " is not available: 0 CUDA device(s) are visible (no GPU or "
                "driver, or CUDA_VISIBLE_DEVICES hides them)");
  EMBER_THROW(DeviceError, op, ": ", device, " does not exist: ", count, " CUDA device(s) are visible (cuda:0",
              count > 1 ? " to cuda:" + std::to_string(count - 1) : std::string(), ")");
}

}  // namespace ember
