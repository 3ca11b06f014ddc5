// A device that does not exist is a DeviceError (core/error.h) wherever ember is asked for it:
// the allocator (tensor creation, .to()), streams, set_thread_device and the default generators
// all go through check_device_exists (core/device.h), whose message names the device asked for
// and what exists. On a CPU-only build (or a machine without a GPU) cuda:0 is such a device;
// with GPUs, cuda:<count> is.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <thread>

#include "core/allocator.h"
#include "core/config.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/stream.h"
#include "core/thread_device.h"

namespace ember {
namespace {

const Device kMissingCuda = Device::cuda(cuda_device_count());  // cuda:0 without a GPU

// What the message must say exists: the build without CUDA, or the visible count.
std::string what_exists() {
  if (!EMBER_HAVE_CUDA) return "ember was built without CUDA";
  return std::to_string(cuda_device_count()) + " CUDA device(s) are visible";
}

// Runs `f`, which must throw DeviceError whose message starts with `op` and names `device` and
// `exists`.
void expect_device_error(const std::function<void()>& f, const std::string& op, Device device,
                         const std::string& exists) {
  try {
    f();
    ADD_FAILURE() << op << " on " << device << " did not throw";
  } catch (const DeviceError& e) {
    const std::string msg = e.message();
    EXPECT_EQ(msg.rfind(op + ": ", 0), 0u) << msg;
    EXPECT_NE(msg.find(device.str()), std::string::npos) << msg;
    EXPECT_NE(msg.find(exists), std::string::npos) << msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << op << " on " << device << " threw another type: " << e.what();
  }
}

TEST(DeviceError, AMissingCudaDeviceNamesItselfAndWhatExists) {
  const std::string exists = what_exists();
  expect_device_error([] { check_device_exists(kMissingCuda, "my_op"); }, "my_op", kMissingCuda, exists);
  expect_device_error([] { empty({2, 3}, TensorOptions(kFloat32).device(kMissingCuda)); }, "allocator",
                      kMissingCuda, exists);
  expect_device_error([] { (void)native::to(ones({2}), kMissingCuda); }, "allocator", kMissingCuda, exists);
  expect_device_error([] { get_allocator(kMissingCuda); }, "allocator", kMissingCuda, exists);
  expect_device_error([] { new_stream(kMissingCuda); }, "new_stream", kMissingCuda, exists);
  expect_device_error([] { set_current_stream(Stream(kMissingCuda, 7)); }, "set_current_stream", kMissingCuda,
                      exists);
  std::thread([&] {
    expect_device_error([] { set_thread_device(kMissingCuda); }, "set_thread_device", kMissingCuda, exists);
    EXPECT_FALSE(thread_device().has_value()) << "a failed set_thread_device gave the thread a device";
  }).join();
}

TEST(DeviceError, ADeviceIndexOutsideTheTablesNamesTheRange) {
  const Device past_cpu(DeviceType::CPU, kMaxDevicesPerType);
  const std::string cpu_range = "cpu:0 to cpu:" + std::to_string(kMaxDevicesPerType - 1);
  expect_device_error([&] { get_allocator(past_cpu); }, "allocator", past_cpu, cpu_range);
  expect_device_error([&] { default_generator(past_cpu); }, "default_generator", past_cpu, cpu_range);
  expect_device_error([] { get_allocator(Device::cpu(-1)); }, "allocator", Device::cpu(-1), cpu_range);
  std::thread([&] {
    expect_device_error([&] { set_thread_device(past_cpu); }, "set_thread_device", past_cpu, cpu_range);
  }).join();
  const Device negative_cuda = Device::cuda(-1);
  expect_device_error([&] { default_generator(negative_cuda); }, "default_generator", negative_cuda, what_exists());
  expect_device_error([&] { get_allocator(negative_cuda); }, "allocator", negative_cuda, what_exists());
}

TEST(DeviceError, ExistingDevicesPassTheCheck) {
  check_device_exists(Device::cpu(0), "my_op");
  check_device_exists(Device::cpu(kMaxDevicesPerType - 1), "my_op");
  for (int i = 0; i < cuda_device_count(); ++i) check_device_exists(Device::cuda(i), "my_op");
  // A CUDA device's default generator exists before the device is used (seeding comes first).
  EXPECT_EQ(default_generator(kMissingCuda).device(), kMissingCuda);
}

}  // namespace
}  // namespace ember
