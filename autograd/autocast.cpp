#include "autograd/autocast.h"

#include "autograd/ops.h"

namespace ember::autograd {
namespace {

struct State {
  bool enabled = false;
  DType dtype;
};
thread_local State t_cpu{false, kBFloat16};
thread_local State t_cuda{false, kFloat16};

State& state_of(DeviceType type) { return type == DeviceType::CUDA ? t_cuda : t_cpu; }

void check_dtype(DType dtype) {
  EMBER_CHECK_T(ValueError, dtype == kBFloat16 || dtype == kFloat16,
                "autocast: expected dtype bfloat16 or float16, got ", dtype);
}

}  // namespace

bool AutocastMode::is_enabled(DeviceType type) { return state_of(type).enabled; }
DType AutocastMode::dtype(DeviceType type) { return state_of(type).dtype; }
void AutocastMode::set_enabled(DeviceType type, bool enabled) { state_of(type).enabled = enabled; }
void AutocastMode::set_dtype(DeviceType type, DType dtype) {
  check_dtype(dtype);
  state_of(type).dtype = dtype;
}

autocast::autocast(DeviceType device_type, std::optional<DType> dtype, bool enabled)
    : type_(device_type), prev_enabled_(AutocastMode::is_enabled(device_type)),
      prev_dtype_(AutocastMode::dtype(device_type)) {
  const DType d = dtype.value_or(device_type == DeviceType::CUDA ? kFloat16 : kBFloat16);
  check_dtype(d);
  AutocastMode::set_dtype(type_, d);
  AutocastMode::set_enabled(type_, enabled);
}

autocast::~autocast() {
  state_of(type_) = State{prev_enabled_, prev_dtype_};
}

bool autocast_active_for(const Tensor& t) { return t.defined() && AutocastMode::is_enabled(t.device().type); }

Tensor autocast_to_lower(const Tensor& t) {
  if (!autocast_active_for(t)) return t;
  const DType d = t.dtype();
  if (d != kFloat32 && d != kBFloat16 && d != kFloat16) return t;
  return to(t, AutocastMode::dtype(t.device().type));
}

Tensor autocast_to_float32(const Tensor& t) {
  if (!autocast_active_for(t)) return t;
  const DType d = t.dtype();
  if (d != kBFloat16 && d != kFloat16) return t;
  return to(t, kFloat32);
}

}  // namespace ember::autograd
