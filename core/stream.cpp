// The device-neutral half of streams (core/stream.h): the per-thread current stream table and
// the pool's round robin. The CUDA calls live in core/cuda/cuda_stream.cpp.
#include "core/stream.h"
#include "core/thread_device.h"

#include <array>
#include <atomic>

#include "core/config.h"
#include "core/error.h"

namespace ember {
namespace {

// The calling thread's current stream id per CUDA device (0: the default stream).
thread_local std::array<uint64_t, kMaxDevicesPerType> t_current{};
thread_local std::optional<Device> t_thread_device;  // see Note [Device-owning threads]

std::array<std::atomic<uint32_t>, kMaxDevicesPerType> g_next_pool_slot{};

}  // namespace

void Stream::synchronize() const {
  if (device_.is_cuda() && cuda_device_count() > 0) detail::cuda_stream_synchronize(device_.index, id_);
}

bool Stream::query() const {
  if (device_.is_cuda() && cuda_device_count() > 0) return detail::cuda_stream_query(device_.index, id_);
  return true;
}

std::ostream& operator<<(std::ostream& os, const Stream& s) {
  return os << "Stream(" << s.device() << ", " << (s.is_default() ? "default" : "id " + std::to_string(s.id()))
            << ")";
}

Stream current_stream(Device device) {
  if (!device.is_cuda() || device.index < 0 || device.index >= kMaxDevicesPerType) return Stream(device, 0);
  return Stream(device, t_current[static_cast<size_t>(device.index)]);
}

void set_current_stream(Stream s) {
  if (!s.device().is_cuda()) {
    EMBER_CHECK(s.is_default(), "set_current_stream: a CPU device has only its default stream, got ", s);
    return;
  }
  check_device_exists(s.device(), "set_current_stream");
  t_current[static_cast<size_t>(s.device().index)] = s.id();
}

Stream new_stream(Device device) {
  if (!device.is_cuda()) return Stream(device, 0);
  check_device_exists(device, "new_stream");
  const uint32_t slot = g_next_pool_slot[static_cast<size_t>(device.index)].fetch_add(1) % kStreamPoolSize;
  return Stream(device, detail::cuda_pool_stream(device.index, static_cast<int>(slot)));
}

StreamGuard::StreamGuard(Stream s) : previous_(current_stream(s.device())) { set_current_stream(s); }
StreamGuard::~StreamGuard() {
  if (previous_.device().is_cuda()) t_current[static_cast<size_t>(previous_.device().index)] = previous_.id();
}

void set_thread_device(Device device) {
  check_device_exists(device, "set_thread_device");
  if (device.is_cuda()) detail::cuda_set_thread_device(device.index);
  t_thread_device = device;
}

std::optional<Device> thread_device() { return t_thread_device; }

#if !EMBER_HAVE_CUDA
namespace detail {
// Unreachable: check_device_exists throws DeviceError for every CUDA device first.
void cuda_set_thread_device(int i) { check_device_exists(Device::cuda(i), "set_thread_device"); }
uint64_t cuda_pool_stream(int i, int) {
  check_device_exists(Device::cuda(i), "new_stream");
  return 0;
}
void cuda_stream_synchronize(int, uint64_t) {}
bool cuda_stream_query(int, uint64_t) { return true; }
}  // namespace detail
#endif

}  // namespace ember
