// Device-owning threads (Note [Device-owning threads] in core/thread_device.h): the autograd engine's
// worker for a device and DataParallel's replica threads (parallel_run, also when nested) call
// set_thread_device once, so thread_device() names their device for the thread's life; the
// calling thread is left alone. On logical CPU devices, so it runs everywhere; the CUDA side
// (cudaSetDevice, the caller's stream) is cuda_device_threads_test (label gpu).
#include <gtest/gtest.h>

#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "autograd/ops.h"
#include "core/error.h"
#include "core/ops/factory.h"
#include "core/stream.h"
#include "core/thread_device.h"
#include "parallel/parallel_apply.h"
#include "tests/support/error_text.h"

namespace ember {
namespace {

TEST(DeviceThreads, EngineWorkerOwnsItsDevice) {
  // x on cpu:1, the root on cpu:0: the caller runs cpu:0's nodes and cpu:1's worker the rest.
  Tensor x = ones({3}, TensorOptions().device(Device::cpu(1)).requires_grad(true));
  Tensor y = mul(x, 2.0);
  std::optional<Device> seen;
  std::thread::id seen_thread;
  y.register_hook([&](const Tensor&) {
    seen = thread_device();
    seen_thread = std::this_thread::get_id();
    return Tensor();
  });
  sum(to(y, Device::cpu(0))).backward();
  ASSERT_TRUE(seen.has_value()) << "the hook on cpu:1 ran on a thread without a device";
  EXPECT_EQ(*seen, Device::cpu(1));
  EXPECT_NE(seen_thread, std::this_thread::get_id());
  EXPECT_FALSE(thread_device().has_value()) << "backward() must not give the calling thread a device";
  EXPECT_EQ(x.grad().to_vector<float>(), std::vector<float>({2, 2, 2}));
}

std::vector<std::optional<Device>> devices_seen(const std::vector<Device>& devices, bool nested) {
  std::vector<std::optional<Device>> seen(devices.size());
  std::vector<std::function<void()>> fns;
  for (size_t i = 0; i < devices.size(); ++i) {
    fns.push_back([&, i] {
      if (!nested) {
        seen[i] = thread_device();
        return;
      }
      // A parallel_run inside a replica: plain threads, each owning its device too.
      std::vector<std::optional<Device>> inner = devices_seen({Device::cpu(3), Device::cpu(4)}, false);
      seen[i] = inner[0] == Device::cpu(3) && inner[1] == Device::cpu(4) ? thread_device() : std::nullopt;
    });
  }
  parallel::parallel_run(fns, devices);
  return seen;
}

TEST(DeviceThreads, ReplicaThreadsOwnTheirDevices) {
  const std::vector<Device> devices = {Device::cpu(0), Device::cpu(1), Device::cpu(1)};  // cpu:1 twice
  const auto seen = devices_seen(devices, false);
  for (size_t i = 0; i < devices.size(); ++i) {
    ASSERT_TRUE(seen[i].has_value()) << "replica " << i;
    EXPECT_EQ(*seen[i], devices[i]) << "replica " << i;
  }
  const auto nested = devices_seen({Device::cpu(0), Device::cpu(2)}, true);
  ASSERT_TRUE(nested[0].has_value() && nested[1].has_value()) << "nested replicas did not own cpu:3 and cpu:4";
  EXPECT_EQ(*nested[0], Device::cpu(0));
  EXPECT_EQ(*nested[1], Device::cpu(2));
  EXPECT_FALSE(thread_device().has_value()) << "parallel_run must not give the calling thread a device";
}

TEST(DeviceThreads, SetThreadDeviceLastsForTheThreadAndChecksCudaDevices) {
  std::thread([] {
    EXPECT_FALSE(thread_device().has_value());
    set_thread_device(Device::cpu(5));
    EXPECT_EQ(thread_device(), Device::cpu(5));
    // A CUDA device that does not exist is an Error naming it; the thread keeps its device.
    const Device missing = Device::cuda(cuda_device_count());
    const std::string err = support::error_of<Error>([&] { set_thread_device(missing); });
    EXPECT_NE(err.find(missing.str()), std::string::npos) << err;
    EXPECT_EQ(thread_device(), Device::cpu(5));
  }).join();
  EXPECT_FALSE(thread_device().has_value());
}

}  // namespace
}  // namespace ember
