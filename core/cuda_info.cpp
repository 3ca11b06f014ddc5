#include "core/cuda_info.h"

#include "core/config.h"

namespace ember {

std::string version_string(int normalized) {
  if (normalized <= 0) return "-";
  return std::to_string(normalized / 10000) + "." + std::to_string(normalized / 100 % 100) + "." +
         std::to_string(normalized % 100);
}

#if !EMBER_HAVE_CUDA
// With CUDA these live in core/cuda/cuda_info.cpp.
CudaVersions cuda_versions() { return {}; }
std::vector<CudaDeviceInfo> cuda_device_info() { return {}; }
#endif

}  // namespace ember
