// Checkpoints between a GPU and the CPU: a model and Adam trained on cuda:0 load into a model on
// cpu:0 and the reverse, every parameter and optimizer state tensor on the model's device and
// bit-equal to what was saved (map_location-like loading). Skips without a GPU.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <unistd.h>

#include "tests/nn/checkpoint_device_util.h"
#include "tests/support/cuda.h"

namespace ember::nn {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("ember_cuda_ckpt_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

TEST(CudaCheckpoint, SavedOnGpuLoadsOnCpu) {
  EMBER_REQUIRE_CUDA();
  const std::string p = temp_path("gpu_to_cpu.safetensors");
  testing::expect_checkpoint_moves(test_support::kGpu, Device::cpu(0), p);
  std::filesystem::remove(p);
}

TEST(CudaCheckpoint, SavedOnCpuLoadsOnGpu) {
  EMBER_REQUIRE_CUDA();
  const std::string p = temp_path("cpu_to_gpu.safetensors");
  testing::expect_checkpoint_moves(Device::cpu(0), test_support::kGpu, p);
  std::filesystem::remove(p);
}

}  // namespace
}  // namespace ember::nn
