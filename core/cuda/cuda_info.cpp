// cuda_versions / cuda_device_info (core/cuda_info.h) with CUDA built.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>

#include "core/config.h"
#include "core/cuda_info.h"
#include "core/device.h"
#if EMBER_HAVE_CUDNN
#include <cudnn.h>
#endif

namespace ember {
namespace {

// The runtime and the driver report 1000 * major + 10 * minor.
int from_cuda_encoding(int v) { return v <= 0 ? 0 : normalized_version(v / 1000, v % 1000 / 10, 0); }

int cublas_loaded() {
  int major = -1, minor = -1, patch = -1;
  if (cublasGetProperty(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS ||
      cublasGetProperty(MINOR_VERSION, &minor) != CUBLAS_STATUS_SUCCESS ||
      cublasGetProperty(PATCH_LEVEL, &patch) != CUBLAS_STATUS_SUCCESS) {
    return 0;
  }
  return normalized_version(major, minor, patch);
}

}  // namespace

CudaVersions cuda_versions() {
  CudaVersions v;
  int n = 0;
  if (cudaDriverGetVersion(&n) == cudaSuccess) v.driver.loaded = from_cuda_encoding(n);
  (void)cudaGetLastError();
  if (cudaRuntimeGetVersion(&n) == cudaSuccess) v.runtime.loaded = from_cuda_encoding(n);
  (void)cudaGetLastError();
  v.runtime.built = from_cuda_encoding(CUDART_VERSION);
  v.cublas.loaded = cublas_loaded();
  v.cublas.built = normalized_version(CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR, CUBLAS_VER_PATCH);
#if EMBER_HAVE_CUDNN
  // cuDNN 9 encodes major * 10000 + minor * 100 + patch, as normalized_version does.
  v.cudnn.loaded = static_cast<int>(cudnnGetVersion());
  v.cudnn.built = normalized_version(CUDNN_MAJOR, CUDNN_MINOR, CUDNN_PATCHLEVEL);
#endif
  return v;
}

std::vector<CudaDeviceInfo> cuda_device_info() {
  std::vector<CudaDeviceInfo> out;
  const int count = cuda_device_count();
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) {
      (void)cudaGetLastError();
      continue;
    }
    CudaDeviceInfo d;
    d.index = i;
    d.name = p.name;
    d.major = p.major;
    d.minor = p.minor;
    d.total_memory_bytes = static_cast<int64_t>(p.totalGlobalMem);
    d.multiprocessors = p.multiProcessorCount;
    d.l2_cache_bytes = p.l2CacheSize;
    d.ecc = p.ECCEnabled != 0;
    char bus[32];
    std::snprintf(bus, sizeof bus, "%04x:%02x:%02x.0", static_cast<unsigned>(p.pciDomainID),
                  static_cast<unsigned>(p.pciBusID), static_cast<unsigned>(p.pciDeviceID));
    d.pci_bus_id = bus;
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace ember
