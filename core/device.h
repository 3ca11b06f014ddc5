// Device: a (type, index) pair. CPU devices cpu:0, cpu:1, ... are logical devices of one host:
// each has its own allocator, memory accounting and autograd worker thread. Value type, thread-safe.
#pragma once
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>

namespace ember {

enum class DeviceType : int8_t { CPU = 0, CUDA = 1 };

/// Upper bound on device indices per type (allocators and engine threads are per index).
constexpr int kMaxDevicesPerType = 64;

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  constexpr Device() = default;
  constexpr Device(DeviceType t, int i = 0) : type(t), index(i) {}
  /// Parses "cpu", "cpu:1", "cuda", "cuda:0". Throws ValueError on anything else.
  Device(std::string_view spec);  // NOLINT: implicit, as torch::Device("cuda:0")
  Device(const char* spec) : Device(std::string_view(spec)) {}
  Device(const std::string& spec) : Device(std::string_view(spec)) {}

  static constexpr Device cpu(int i = 0) { return Device(DeviceType::CPU, i); }
  static constexpr Device cuda(int i = 0) { return Device(DeviceType::CUDA, i); }
  constexpr bool is_cpu() const { return type == DeviceType::CPU; }
  constexpr bool is_cuda() const { return type == DeviceType::CUDA; }
  std::string str() const;

  constexpr bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  constexpr bool operator!=(const Device& o) const { return !(*this == o); }
  constexpr bool operator<(const Device& o) const {
    return type != o.type ? type < o.type : index < o.index;
  }
  /// Dense id in [0, 2*kMaxDevicesPerType): used to index per-device tables.
  constexpr int flat_index() const { return static_cast<int>(type) * kMaxDevicesPerType + index; }
};

std::ostream& operator<<(std::ostream& os, const Device& d);

/// Number of CUDA devices visible (0 when ember is built without CUDA or none is present).
int cuda_device_count();
bool cuda_is_available();

/// Throws DeviceError unless `device` exists: a CPU device with an index in [0, kMaxDevicesPerType)
/// (logical devices of this host), a CUDA device with an index below cuda_device_count(). The
/// message starts with `op`, names the device asked for and what exists (no CUDA device, ember
/// built without CUDA, or the visible range cuda:0..cuda:n-1).
void check_device_exists(Device device, std::string_view op);

}  // namespace ember

template <>
struct std::hash<ember::Device> {
  size_t operator()(const ember::Device& d) const noexcept { return std::hash<int>()(d.flat_index()); }
};
