// What the CUDA path runs on: the versions of the CUDA libraries this process loaded next to the
// versions ember was built against, and each visible device's properties. For logs and for the
// GPU check (scripts/gpu_check.sh), where a library older than its build headers is the first
// suspect. Device-neutral (no CUDA headers); without CUDA every version is 0 and no device is
// listed. Thread-safe.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ember {

/// A library's version as loaded at run time and as compiled against (its header's macro);
/// 0 where unknown (not built with it, or the query failed). Encodings as the libraries give
/// them, normalized to major * 10000 + minor * 100 + patch.
struct LibraryVersion {
  int loaded = 0;
  int built = 0;
};

struct CudaVersions {
  /// The newest CUDA version the driver supports (cudaDriverGetVersion); `built` stays 0.
  LibraryVersion driver;
  LibraryVersion runtime;  // libcudart
  LibraryVersion cublas;
  LibraryVersion cudnn;    // 0, 0 without cuDNN
};

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int64_t total_memory_bytes = 0;
  int multiprocessors = 0;
  int64_t l2_cache_bytes = 0;
  bool ecc = false;
  std::string pci_bus_id;  // domain:bus:device.function
};

/// The loaded and built versions of the CUDA runtime, cuBLAS and cuDNN. Creates no context.
CudaVersions cuda_versions();

/// One entry per visible CUDA device (cudaGetDeviceProperties; creates no context).
std::vector<CudaDeviceInfo> cuda_device_info();

/// "13.0.0" for 130000; "-" for 0.
std::string version_string(int normalized);

/// "X.Y.Z" of a library version from its parts; 0 when any part is negative.
constexpr int normalized_version(int major, int minor, int patch) {
  return major < 0 || minor < 0 || patch < 0 ? 0 : major * 10000 + minor * 100 + patch;
}

}  // namespace ember
