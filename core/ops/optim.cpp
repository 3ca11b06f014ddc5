// adam_update_ / sgd_update_ (core/ops/nn_native.h): one optimizer step over a list of
// parameters. One driver (for_each_update) sorts the parameters: contiguous float32/64 tensors
// with their state alike run one multi-tensor call per (device, dtype) through the stubs of
// core/ops/multi_tensor_stubs.h; anything else (strided or mixed-dtype state) the same formula
// as native tensor ops in the same op order.
#include <cmath>
#include <map>
#include <tuple>
#include <utility>

#include "core/ops/multi_tensor_stubs.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"

namespace ember::native {

detail::DispatchStub<MultiTensorAdamFn> multi_tensor_adam_stub;
detail::DispatchStub<MultiTensorSgdFn> multi_tensor_sgd_stub;

namespace {

// lists[0] are the parameters, lists[1] the gradients (read only); later lists are state the
// step writes (an empty list: not used). Entry i of every list belongs to parameter i.
using Lists = std::vector<const std::vector<Tensor>*>;

bool fusable_with(const Tensor& p, const Tensor& t) {
  return t.device() == p.device() && t.is_contiguous() && t.dtype() == p.dtype() && t.sizes() == p.sizes();
}

bool fusable(const Lists& lists, size_t i) {
  const Tensor& p = (*lists[0])[i];
  if (!(p.is_contiguous() && (p.dtype() == kFloat32 || p.dtype() == kFloat64))) return false;
  for (size_t l = 1; l < lists.size(); ++l) {
    if (!lists[l]->empty() && !fusable_with(p, (*lists[l])[i])) return false;
  }
  return true;
}

// The multi-tensor entry of parameter i: list l's data pointer in ptr[l] (null when not used).
kernels::MultiTensorEntry entry_of(const Lists& lists, size_t i) {
  kernels::MultiTensorEntry e;
  for (size_t l = 0; l < lists.size(); ++l) {
    if (!lists[l]->empty()) e.ptr[l] = (*lists[l])[i].raw_data();
  }
  e.numel = (*lists[0])[i].numel();
  return e;
}

void bump_written(const Lists& lists, size_t i) {
  for (size_t l = 0; l < lists.size(); ++l) {
    if (l != 1 && !lists[l]->empty()) (*lists[l])[i].bump_version();
  }
}

// Fusable parameters are grouped by (device, dtype) and run(dtype, device, entries) runs once per
// group, entry_arg(i, e) filling each entry's per-tensor scalars; fallback(i) for the others.
template <typename Fallback, typename EntryArg, typename Run>
void for_each_update(const char* op, const Lists& lists, Fallback fallback, EntryArg entry_arg, Run run) {
  const size_t n = lists[0]->size();
  for (size_t l = 1; l < lists.size(); ++l) {
    EMBER_CHECK_T(ValueError, l >= 2 ? lists[l]->empty() || lists[l]->size() == n : lists[l]->size() == n, op,
                  ": expected ", n, " tensors in list ", l, ", got ", lists[l]->size());
  }
  using Key = std::tuple<DeviceType, int, DType>;
  std::map<Key, std::vector<kernels::MultiTensorEntry>> groups;
  std::map<Key, std::vector<size_t>> members;
  for (size_t i = 0; i < n; ++i) {
    const Tensor& p = (*lists[0])[i];
    if (!fusable(lists, i)) {
      fallback(i);
      continue;
    }
    const Key key{p.device().type, p.device().index, p.dtype()};
    kernels::MultiTensorEntry e = entry_of(lists, i);
    entry_arg(i, e);
    groups[key].push_back(e);
    members[key].push_back(i);
  }
  for (const auto& [key, entries] : groups) {
    run(std::get<2>(key), Device(std::get<0>(key), std::get<1>(key)), entries);
    for (size_t i : members[key]) bump_written(lists, i);
  }
}

void adam_reference(Tensor p, const Tensor& grad, Tensor exp_avg, Tensor exp_avg_sq, const Tensor* max_exp_avg_sq,
                    double step, const kernels::AdamArgs& a) {
  Tensor g = a.maximize ? neg(grad) : grad;
  if (a.weight_decay != 0.0) {
    if (a.decoupled) {
      mul_(p, 1.0 - a.lr * a.weight_decay);
    } else {
      g = add(g, p, a.weight_decay);
    }
  }
  mul_(exp_avg, a.beta1);
  add_(exp_avg, g, 1.0 - a.beta1);
  mul_(exp_avg_sq, a.beta2);
  addcmul_(exp_avg_sq, g, g, 1.0 - a.beta2);
  const kernels::AdamStepTerms terms = kernels::adam_step_terms(a, step);
  Tensor denom;
  if (max_exp_avg_sq != nullptr) {
    Tensor vmax = *max_exp_avg_sq;
    copy_(vmax, maximum(vmax, exp_avg_sq));
    denom = div(sqrt(vmax), terms.bc2_sqrt);
  } else {
    denom = div(sqrt(exp_avg_sq), terms.bc2_sqrt);
  }
  add_(denom, a.eps);
  addcdiv_(p, exp_avg, denom, terms.neg_step_size);
}

void sgd_reference(Tensor p, const Tensor& grad, const Tensor* momentum_buffer, bool init_buffer,
                   const kernels::SgdArgs& a) {
  Tensor d = a.maximize ? neg(grad) : grad;
  if (a.weight_decay != 0.0) d = add(d, p, a.weight_decay);
  if (momentum_buffer != nullptr) {
    Tensor buf = *momentum_buffer;
    if (init_buffer) {
      copy_(buf, d);
    } else {
      mul_(buf, a.momentum);
      add_(buf, d, 1.0 - a.dampening);
    }
    d = a.nesterov ? add(d, buf, a.momentum) : buf;
  }
  add_(p, d, -a.lr);
}

}  // namespace

void adam_update_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                  const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                  const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<double>& steps,
                  const kernels::AdamArgs& a) {
  const Lists lists{&params, &grads, &exp_avgs, &exp_avg_sqs, &max_exp_avg_sqs};
  EMBER_CHECK_T(ValueError, exp_avgs.size() == params.size() && exp_avg_sqs.size() == params.size() &&
                                steps.size() == params.size(),
                "adam_update_: expected ", params.size(), " exp_avgs, exp_avg_sqs and steps, got ", exp_avgs.size(),
                ", ", exp_avg_sqs.size(), " and ", steps.size());
  const bool amsgrad = !max_exp_avg_sqs.empty();
  for_each_update(
      "adam_update_", lists,
      [&](size_t i) {
        adam_reference(params[i], grads[i], exp_avgs[i], exp_avg_sqs[i], amsgrad ? &max_exp_avg_sqs[i] : nullptr,
                       steps[i], a);
      },
      [&](size_t i, kernels::MultiTensorEntry& e) {
        const kernels::AdamStepTerms terms = kernels::adam_step_terms(a, steps[i]);
        e.arg[0] = terms.neg_step_size;
        e.arg[1] = terms.bc2_sqrt;
      },
      [&](DType dtype, Device device, const std::vector<kernels::MultiTensorEntry>& entries) {
        multi_tensor_adam_stub.kernel(device, "adam_update_")(dtype, a, entries.data(),
                                                              static_cast<int64_t>(entries.size()), device.index);
      });
}

void sgd_update_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                 const std::vector<Tensor>& momentum_buffers, const std::vector<bool>& init_buffers,
                 const kernels::SgdArgs& a) {
  const Lists lists{&params, &grads, &momentum_buffers};
  const bool use_buf = !momentum_buffers.empty();
  EMBER_CHECK_T(ValueError, !use_buf || init_buffers.size() == params.size(), "sgd_update_: expected ",
                params.size(), " init_buffers flags, got ", init_buffers.size());
  for_each_update(
      "sgd_update_", lists,
      [&](size_t i) {
        sgd_reference(params[i], grads[i], use_buf ? &momentum_buffers[i] : nullptr, use_buf && init_buffers[i], a);
      },
      [&](size_t i, kernels::MultiTensorEntry& e) { e.arg[0] = use_buf && init_buffers[i] ? 1.0 : 0.0; },
      [&](DType dtype, Device device, const std::vector<kernels::MultiTensorEntry>& entries) {
        multi_tensor_sgd_stub.kernel(device, "sgd_update_")(dtype, a, use_buf, entries.data(),
                                                            static_cast<int64_t>(entries.size()), device.index);
      });
}

}  // namespace ember::native
