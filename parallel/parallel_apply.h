// parallel_apply: runs each replica's forward on its own thread, all concurrently, one
// persistent thread per device (see Note [Replica threads] in parallel_apply.cpp). The caller's
// grad mode is used in every thread. The caller waits for all replicas; if any threw, the error
// of the lowest-numbered failing replica is re-raised in the caller, as the same ember error
// type, prefixed "Caught ValueError in replica 1 on device cpu:1: ". Thread-safe.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/profiler.h"
#include "core/tensor.h"
#include "nn/module.h"

namespace ember::parallel {

/// Runs fns[i] on the replica thread of devices[i], concurrently, and waits for all of them.
/// A single function runs on the calling thread. Rethrows as described above.
void parallel_run(const std::vector<std::function<void()>>& fns, const std::vector<Device>& devices);

namespace detail {
/// The device a replica lives on: that of its first parameter or buffer, else of the first
/// tensor among its inputs, else cpu:i.
Device replica_device(const nn::Module& replica, const std::vector<Tensor>& input_tensors, size_t i);

template <class T>
void collect_tensors(const T& v, std::vector<Tensor>& out) {
  using U = std::remove_cvref_t<T>;
  if constexpr (std::is_same_v<U, Tensor>) {
    if (v.defined()) out.push_back(v);
  }
}
}  // namespace detail

/// Calls replicas[i]->forward(inputs[i]...) concurrently, replica i on devices[i] (default: the
/// device of each replica's parameters). Returns the outputs in replica order.
template <class M, class... Args>
auto parallel_apply(const std::vector<std::shared_ptr<M>>& replicas, const std::vector<std::tuple<Args...>>& inputs,
                    std::vector<Device> devices = {}) {
  using R = std::remove_cvref_t<decltype(std::declval<M&>().forward(std::declval<Args&>()...))>;
  EMBER_PROFILE_SCOPE("DataParallel.parallel_apply", kDataParallel);
  EMBER_CHECK_T(ValueError, replicas.size() == inputs.size(), "parallel_apply: got ", replicas.size(),
                " replicas and ", inputs.size(), " input lists; expected one input list per replica");
  if (devices.empty()) {
    for (size_t i = 0; i < replicas.size(); ++i) {
      std::vector<Tensor> ts;
      std::apply([&](const auto&... a) { (detail::collect_tensors(a, ts), ...); }, inputs[i]);
      devices.push_back(detail::replica_device(*replicas[i], ts, i));
    }
  }
  EMBER_CHECK_T(ValueError, devices.size() == replicas.size(), "parallel_apply: got ", replicas.size(),
                " replicas and ", devices.size(), " devices");
  std::vector<std::optional<R>> results(replicas.size());
  std::vector<std::tuple<Args...>> args = inputs;  // each thread owns its argument copies
  std::vector<std::function<void()>> fns;
  fns.reserve(replicas.size());
  for (size_t i = 0; i < replicas.size(); ++i) {
    fns.emplace_back([&, i] {
      M& m = *replicas[i];
      results[i].emplace(std::apply([&](auto&... a) { return m.forward(a...); }, args[i]));
    });
  }
  parallel_run(fns, devices);
  std::vector<R> out;
  out.reserve(results.size());
  for (auto& r : results) out.push_back(std::move(*r));
  return out;
}

}  // namespace ember::parallel
