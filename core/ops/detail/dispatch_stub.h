// DispatchStub: the one way an op reaches its device kernels. Each op family declares its stubs
// once in core/ops/<family>.h; core/kernels/cpu/register.cpp and core/kernels/cuda/register.cpp
// fill them. Thread-safe: slots are atomics written once under a once-flag.
#pragma once
#include <atomic>
#include <utility>

#include "core/device.h"
#include "core/profiler.h"

namespace ember::native::detail {

// Note [Dispatch stubs]
// An op checks its arguments, allocates its output and calls `stub.kernel(device, name)(args...)`;
// it never asks which device it is on. A stub holds one kernel pointer per DeviceType, with one
// signature for both devices. The slots are filled by explicit calls, never static initializers
// (one grep for register_cpu_kernels / register_cuda_kernels finds every kernel):
// register_cpu_kernels() runs on the first dispatch to a CPU kernel, register_cuda_backend()
// (core/cuda/cuda_backend.h, which calls register_cuda_kernels()) when the first CUDA allocator
// or kernel is asked for. A CUDA tensor reaching a build without CUDA finds an empty slot and
// gets a DeviceError naming the op.

/// Fills the CPU slots once per process (core/kernels/cpu/register.cpp); later calls return at once.
void register_cpu_kernels_once();
/// Makes the slots of `type` filled if this build has kernels for it.
void ensure_kernels_registered(DeviceType type);
/// Throws DeviceError: `op` got a tensor of `device`, for which this build has no kernel.
[[noreturn]] void throw_no_kernel(const char* op, Device device);

template <typename Signature>
class DispatchStub;

template <typename Ret, typename... Args>
class DispatchStub<Ret(Args...)> {
 public:
  using Fn = Ret (*)(Args...);

  /// A kernel about to be called: the call is one profiler span named after the op (Note
  /// [Profiler cost]); converts to the plain pointer for a caller that keeps it.
  struct Call {
    Fn fn;
    const char* op;
    template <typename... A>
    Ret operator()(A&&... args) const {
      EMBER_PROFILE_SCOPE(op, kOp);
      return fn(std::forward<A>(args)...);
    }
    operator Fn() const { return fn; }  // NOLINT: implicit, as the pointer it wraps
  };

  DispatchStub() = default;
  DispatchStub(const DispatchStub&) = delete;
  DispatchStub& operator=(const DispatchStub&) = delete;

  /// The kernel for `device`; throws DeviceError naming `op` when this build has none.
  Call kernel(Device device, const char* op) const {
    Fn f = slot(device.type).load(std::memory_order_acquire);
    if (f != nullptr) [[likely]]
      return Call{f, op};
    ensure_kernels_registered(device.type);
    f = slot(device.type).load(std::memory_order_acquire);
    if (f == nullptr) throw_no_kernel(op, device);
    return Call{f, op};
  }
  /// Whether `type` has a kernel (registering the device's kernels first).
  bool has_kernel(DeviceType type) const {
    ensure_kernels_registered(type);
    return slot(type).load(std::memory_order_acquire) != nullptr;
  }
  /// Called by the register functions only.
  void set(DeviceType type, Fn fn) { slot(type).store(fn, std::memory_order_release); }

 private:
  std::atomic<Fn>& slot(DeviceType type) const { return type == DeviceType::CUDA ? cuda_ : cpu_; }

  mutable std::atomic<Fn> cpu_{nullptr};
  mutable std::atomic<Fn> cuda_{nullptr};
};

}  // namespace ember::native::detail
