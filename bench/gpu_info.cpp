// ember-gpu-info: the record a GPU run's figures need. Prints, one per line,
//   library NAME loaded X.Y.Z built X.Y.Z [NOTE]   driver (the CUDA version it supports), runtime,
//                                                   cublas, cudnn, nccl
//   device cuda:I name="..." sm_XY memory_mib=N multiprocessors=N l2_kib=N ecc=on|off pci=...
//   file PATH                                       every shared object mapped into this process
//                                                   after a cuBLAS product and a cuDNN LSTM ran
//                                                   (cuDNN opens its sub-libraries on first use)
// NOTE is "older-than-built" (a minor version below the headers ember was compiled with: a
// symbol the build expects may be missing) or "MISMATCH" (another major version, or none found).
// Exit status 1 when a line says MISMATCH (or the driver supports a CUDA older than the runtime),
// else 0; without a GPU it prints the versions and exits 0. Used by scripts/gpu_check.sh.
#include <cstdio>
#include <fstream>
#include <set>
#include <string>

#include "core/config.h"
#include "core/cuda_info.h"
#include "core/device.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"
#include "nn/rnn.h"
#if EMBER_HAVE_NCCL
#include "parallel/distributed/nccl/process_group_nccl.h"
#endif

namespace {
using namespace ember;

// Prints the library line; returns false on a mismatch.
bool print_library(const char* name, LibraryVersion v, bool check_built = true) {
  std::string note;
  bool ok = true;
  if (check_built && v.built > 0) {
    if (v.loaded / 10000 != v.built / 10000) {
      note = " MISMATCH";
      ok = false;
    } else if (v.loaded < v.built) {
      note = " older-than-built";
    }
  }
  std::printf("library %s loaded %s built %s%s\n", name, version_string(v.loaded).c_str(),
              version_string(v.built).c_str(), note.c_str());
  return ok;
}

// Every shared object in /proc/self/maps, once each, in mapping order.
void print_mapped_files() {
  std::ifstream maps("/proc/self/maps");
  std::set<std::string> seen;
  std::string line;
  while (std::getline(maps, line)) {
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    if (path.find(".so") == std::string::npos || !seen.insert(path).second) continue;
    std::printf("file %s\n", path.c_str());
  }
}

}  // namespace

int main() {
  bool ok = true;
  const CudaVersions v = cuda_versions();
  print_library("driver", v.driver, /*check_built=*/false);
  ok &= print_library("runtime", v.runtime);
  if (v.driver.loaded > 0 && v.driver.loaded < v.runtime.loaded) {
    std::printf("library driver: supports CUDA %s, older than the runtime's %s: MISMATCH\n",
                version_string(v.driver.loaded).c_str(), version_string(v.runtime.loaded).c_str());
    ok = false;
  }
  ok &= print_library("cublas", v.cublas);
  if (EMBER_HAVE_CUDNN) ok &= print_library("cudnn", v.cudnn);
#if EMBER_HAVE_NCCL
  ok &= print_library("nccl", parallel::ProcessGroupNCCL::nccl_version());
#endif
  const auto devices = cuda_device_info();
  for (const CudaDeviceInfo& d : devices) {
    std::printf("device cuda:%d name=\"%s\" sm_%d%d memory_mib=%lld multiprocessors=%d l2_kib=%lld ecc=%s pci=%s\n",
                d.index, d.name.c_str(), d.major, d.minor, static_cast<long long>(d.total_memory_bytes >> 20),
                d.multiprocessors, static_cast<long long>(d.l2_cache_bytes >> 10), d.ecc ? "on" : "off",
                d.pci_bus_id.c_str());
  }
  if (!devices.empty()) {
    // Load what the GPU tests load: cuBLAS (and cuBLASLt) with a product, cuDNN with an LSTM.
    const Device gpu = Device::cuda(0);
    Tensor a = native::to(ones({8, 8}), gpu);
    (void)native::sum(native::mm(a, a)).item();
    nn::LSTMImpl lstm(nn::LSTMOptions(4, 4));
    lstm.to(gpu);
    (void)native::sum(std::get<0>(lstm.forward(native::to(ones({3, 2, 4}), gpu)))).item();
    const bool cudnn = native::cudnn_rnn_usable(native::CudnnRnnConfig{}, native::to(ones({1, 1}), gpu));
    std::printf("cudnn_rnn %s\n", cudnn ? "usable" : "not usable (the LSTM ran on the fallback)");
  }
  print_mapped_files();
  std::fflush(stdout);
  return ok ? 0 : 1;
}
