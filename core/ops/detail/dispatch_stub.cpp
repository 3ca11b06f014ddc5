#include "core/ops/detail/dispatch_stub.h"

#include <mutex>

#include "core/cuda/cuda_backend.h"
#include "core/error.h"
#include "core/kernels/cpu/register.h"

namespace ember::native::detail {

void register_cpu_kernels_once() {
  static std::once_flag once;
  std::call_once(once, [] { kernels::cpu::register_cpu_kernels(); });
}

void ensure_kernels_registered(DeviceType type) {
  if (type == DeviceType::CUDA) {
    ember::detail::register_cuda_backend();  // once; a no-op without CUDA (core/device.cpp)
  } else {
    register_cpu_kernels_once();
  }
}

void throw_no_kernel(const char* op, Device device) {
  if (device.is_cuda()) {
    EMBER_THROW(DeviceError, op, ": got a CUDA tensor, but ember was built without CUDA (configure with -DEMBER_CUDA=ON)");
  }
  EMBER_THROW(DeviceError, op, ": no kernel for ", device, " is registered");
}

}  // namespace ember::native::detail
