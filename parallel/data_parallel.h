// DataParallel<M>: single-process data parallelism (torch.nn.DataParallel). Each call scatters
// the batch over the devices (each argument along its own scatter dim), replicates the module
// (parameters broadcast with autograd, buffers copied), runs the replicas concurrently, one
// thread per device, and gathers the outputs on the output device. Backward runs each replica's
// part on its device's engine thread and sums the gradients into the wrapped module's .grad.
// The wrapped module is registered as the child "module" (state_dict keys "module.<name>").
// Unlike PyTorch, the replica on devices[0] is a copy too (see Note [Replica parameters]): a
// forward that updates a buffer in place updates a replica's copy, on every device, never the
// wrapped module's. All outputs are gathered along `dim` (as PyTorch: an LSTM state
// [L, B, H] is batched on dim 1, so use dim 1 — time-major — when a forward returns (h, c)).
// Not thread-safe (a Module): one call at a time per DataParallel.
#pragma once
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <ostream>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "autograd/ops.h"
#include "nn/module.h"
#include "parallel/parallel_apply.h"
#include "parallel/replicate.h"
#include "parallel/scatter_gather.h"

namespace ember::parallel {

/// All CUDA devices when there are any, else {cpu:0, cpu:1}.
std::vector<Device> default_data_parallel_devices();

struct DataParallelOptions {
  std::optional<std::vector<Device>> devices;  // unset: default_data_parallel_devices()
  std::optional<Device> output_device;          // unset: devices[0]
  int64_t dim = 0;                      // gather dim, and scatter dim of arguments without their own
  IntList scatter_dims;                 // argument k is split along scatter_dims[k] (when given)
  /// The same bits for any device list (Note [DataParallel shards] in data_parallel.cpp): each
  /// call's batch is cut into num_shards equal shards, shard s runs as its own replica on
  /// devices[s * D / num_shards] (D devices: contiguous ranges of shards), and each
  /// parameter's gradient is the exact sum of the shards' gradients (fixed point, as
  /// DistributedDataParallel's deterministic option). Also with one device; CPU or CUDA devices.
  bool deterministic = false;
  /// Under `deterministic`: shards per call (>= 1); every call's batch must divide into them.
  int64_t num_shards = 0;
  /// Under `deterministic`: false (DataParallel's meaning, right for a loss over the gathered
  /// outputs): .grad gets the sum of the shards' gradients. true: their mean, as
  /// DistributedDataParallel's deterministic option and DeterministicReducer write it, right
  /// when each shard's forward returns its own mean loss and backward runs on the sum of the
  /// gathered losses; then a job gives the same bits in one process, on any device list and on
  /// any number of ranks.
  bool average_shards = false;
};

namespace detail {
/// DataParallel's construction checks (PyTorch raises at construction too): ValueError for an
/// empty list or one mixing CPU and CUDA devices, DeviceError (check_device_exists) for a device
/// or output_device that does not exist. A device listed twice is allowed, as in PyTorch: it gets
/// two replicas (see Note [Replica threads] in parallel/parallel_apply.cpp).
void check_data_parallel_devices(const std::vector<Device>& devices, const std::optional<Device>& output_device);
/// DataParallelOptions::deterministic's check: num_shards >= 1 and at most 2^20 (ValueError).
void check_deterministic_options(int64_t num_shards);
/// Shard s's device: devices[s * D / num_shards].
std::vector<Device> shard_devices(const std::vector<Device>& devices, int64_t num_shards);
/// ValueError unless the batch (p.size, found by probing the arguments) is a positive multiple of num_shards.
void check_shard_batch(const BatchProbe& p, int64_t num_shards);
/// Throws unless every parameter and buffer of `module` is on `device` (PyTorch's message).
void check_module_on_device(const nn::Module& module, Device device);
template <class T>
decltype(auto) to_device(T&& v, Device device) {
  if constexpr (std::is_same_v<std::remove_cvref_t<T>, Tensor>) {
    return v.defined() ? ember::to(v, device) : Tensor();
  } else {
    return std::forward<T>(v);
  }
}
}  // namespace detail

template <class M>
class DataParallel : public nn::Module {
 public:
  /// Wraps `module`, whose parameters and buffers must be on devices[0] when called. No device
  /// list (or std::nullopt, PyTorch's None): default_data_parallel_devices(). Throws ValueError for
  /// a null module, an empty device list or one mixing CPU and CUDA devices; DeviceError for a
  /// device or output_device that does not exist. A device may be listed twice (as in PyTorch).
  explicit DataParallel(std::shared_ptr<M> module, std::optional<std::vector<Device>> devices = std::nullopt,
                        std::optional<Device> output_device = std::nullopt, int64_t dim = 0)
      : DataParallel(std::move(module), DataParallelOptions{std::move(devices), output_device, dim, {}}) {}
  /// The same with a braced list, e.g. {Device::cpu(0), Device::cpu(1)}; `{}` is an empty list.
  DataParallel(std::shared_ptr<M> module, std::initializer_list<Device> devices,
               std::optional<Device> output_device = std::nullopt, int64_t dim = 0)
      : DataParallel(std::move(module), std::vector<Device>(devices), output_device, dim) {}

  DataParallel(std::shared_ptr<M> module, DataParallelOptions options) : nn::Module("DataParallel") {
    EMBER_CHECK_T(ValueError, module != nullptr, "DataParallel: the module is null");
    devices_ = options.devices ? std::move(*options.devices) : default_data_parallel_devices();
    detail::check_data_parallel_devices(devices_, options.output_device);
    output_device_ = options.output_device ? *options.output_device : devices_[0];
    dim_ = options.dim;
    scatter_dims_ = std::move(options.scatter_dims);
    deterministic_ = options.deterministic;
    num_shards_ = options.num_shards;
    average_shards_ = options.average_shards;
    if (deterministic_) detail::check_deterministic_options(num_shards_);
    module_ = register_module("module", std::move(module));
  }

  /// Argument k of a call is split along dims[k]; later arguments use dim. E.g. {1, 0} for
  /// (padded_input [T x B x *], lengths [B]). A call with fewer arguments than entries throws
  /// ValueError.
  DataParallel& scatter_dims(IntList dims) {
    scatter_dims_ = std::move(dims);
    return *this;
  }
  const IntList& scatter_dims() const { return scatter_dims_; }

  /// Calls M::forward on each replica's share of the arguments and gathers the results. Tensor
  /// arguments (also in vectors/tuples) are split along their scatter dim, others given to each
  /// replica unchanged. Returns what M::forward returns (Tensor, tuples/pairs/vectors of them).
  /// With one device (or a batch that makes one chunk) the wrapped module itself runs on
  /// devices[0]: no replicas. One device is a plain call, as PyTorch (no gather to output_device).
  template <class... Args>
  auto forward(Args&&... args) {
    using R = std::remove_cvref_t<decltype(module_->forward(std::declval<std::remove_cvref_t<Args>&>()...))>;
    EMBER_CHECK_T(ValueError, scatter_dims_.size() <= sizeof...(Args), "DataParallel: scatter_dims ", scatter_dims_,
                  " has ", scatter_dims_.size(), " entries but forward got ", sizeof...(Args),
                  " arguments (expected at most one scatter dim per argument)");
    detail::check_module_on_device(*module_, devices_[0]);
    if (deterministic_) return R(shard_forward<R>(args...));
    if (devices_.size() == 1) return R(module_->forward(detail::to_device(std::forward<Args>(args), devices_[0])...));
    ScatterSpec spec{scatter_dims_, dim_, std::nullopt};
    std::vector<std::tuple<std::remove_cvref_t<Args>...>> inputs = scatter_args(devices_, spec, args...);
    if (inputs.empty()) return R(module_->forward(std::forward<Args>(args)...));  // no tensor to split
    if (inputs.size() == 1) {
      // One chunk (batch of 1): the module itself on devices[0] computes exactly what a replica would.
      R out = std::apply([&](auto&... a) { return R(module_->forward(a...)); }, inputs[0]);
      return R(gather(std::vector<R>{std::move(out)}, output_device_, dim_));
    }
    std::vector<Device> used(devices_.begin(), devices_.begin() + static_cast<std::ptrdiff_t>(inputs.size()));
    auto replicas = replicate(module_, used);
    std::vector<R> outputs = parallel_apply(replicas, inputs, used);
    return R(gather(outputs, output_device_, dim_));
  }
  template <class... Args>
  auto operator()(Args&&... args) {
    return forward(std::forward<Args>(args)...);
  }

  const std::shared_ptr<M>& module() const { return module_; }
  const std::vector<Device>& device_ids() const { return devices_; }
  Device output_device() const { return output_device_; }
  int64_t dim() const { return dim_; }
  bool deterministic() const { return deterministic_; }
  int64_t num_shards() const { return num_shards_; }

  void pretty_print(std::ostream& os) const override {
    os << "DataParallel(device_ids=[";
    for (size_t i = 0; i < devices_.size(); ++i) os << (i ? ", " : "") << devices_[i];
    os << "], output_device=" << output_device_ << ", dim=" << dim_ << ")\n  (module): ";
    module_->pretty_print(os);
  }

 private:
  // Note [DataParallel shards] in data_parallel.cpp.
  template <class R, class... Args>
  R shard_forward(const Args&... args) {
    const std::vector<Device> shard_devices = detail::shard_devices(devices_, num_shards_);
    ScatterSpec spec{scatter_dims_, dim_, std::nullopt};
    detail::BatchProbe p;
    [&]<size_t... I>(std::index_sequence<I...>) {
      (detail::probe(args, spec.dim_for(I), "argument " + std::to_string(I), p), ...);
    }(std::index_sequence_for<Args...>{});
    detail::check_shard_batch(p, num_shards_);
    spec.chunk_sizes = IntList(static_cast<size_t>(num_shards_), p.size / num_shards_);
    std::vector<std::tuple<std::remove_cvref_t<Args>...>> inputs = scatter_args(shard_devices, spec, args...);
    ReplicateOptions ro;
    ro.exact_sum_divisor = average_shards_ ? static_cast<double>(num_shards_) : 1.0;
    auto replicas = replicate(module_, shard_devices, ro);
    std::vector<R> outputs = parallel_apply(replicas, inputs, shard_devices);
    return R(gather(outputs, output_device_, dim_));
  }

  std::shared_ptr<M> module_;
  std::vector<Device> devices_;
  Device output_device_;
  int64_t dim_ = 0;
  IntList scatter_dims_;
  bool deterministic_ = false;
  int64_t num_shards_ = 0;
  bool average_shards_ = false;
};

}  // namespace ember::parallel
