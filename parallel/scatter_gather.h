// Differentiable scatter and gather for DataParallel. scatter splits a batch into chunks, one per
// device (ScatterBackward gathers the chunks' gradients back onto the source device); gather
// concatenates replica outputs on one device (GatherBackward sends each slice of the gradient
// back to its replica's device). The templates at the bottom scatter a whole argument list
// (each argument along its own dim) and gather structured outputs (any nested value of
// core/nested.h, e.g. (output, (h, c))). Thread-safe: functions only read their inputs.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/nested.h"
#include "core/tensor.h"
#include "parallel/comm.h"

namespace ember::parallel {

/// Splits `input` along `dim` as torch.chunk does (or by `chunk_sizes`) and puts chunk i on
/// devices[i]. Returns one tensor per chunk: fewer than devices when the dimension is shorter
/// than the device count. Every chunk owns its memory (also on the input's own device).
/// Differentiable. Throws ValueError/IndexError on an empty device list, a 0-dim input or bad sizes.
std::vector<Tensor> scatter(const Tensor& input, const std::vector<Device>& devices, int64_t dim = 0,
                            const std::optional<IntList>& chunk_sizes = std::nullopt);

/// Scatters several tensors together, inputs[j] along dims[j] (dims may be shorter than inputs:
/// the rest use 0). All must have the same size along their scatter dim (the batch), so they
/// split alike. result[i][j] is chunk i of inputs[j], on devices[i].
std::vector<std::vector<Tensor>> scatter(const std::vector<Tensor>& inputs, const std::vector<Device>& devices,
                                         const IntList& dims,
                                         const std::optional<IntList>& chunk_sizes = std::nullopt);

/// Concatenates replica outputs along `dim` on `device`. 0-dim outputs (e.g. per-replica losses)
/// are stacked into a vector, as PyTorch does. Differentiable. Unequal sizes outside `dim`
/// raise ValueError naming the replicas and total_length (see comm::gather).
Tensor gather(const std::vector<Tensor>& outputs, Device device, int64_t dim = 0);

// ---- structured arguments and outputs (DataParallel) ------------------------------------------------

/// How scatter_args splits an argument list: argument k along dims[k] when given, else default_dim.
struct ScatterSpec {
  IntList dims;
  int64_t default_dim = 0;
  std::optional<IntList> chunk_sizes;
  int64_t dim_for(size_t arg) const { return arg < dims.size() ? dims[arg] : default_dim; }
};

namespace detail {

/// Size along the scatter dim of every defined tensor of an argument, described for errors.
struct BatchProbe {
  int64_t size = -1;
  std::string first;  // "argument 0, tensor 1 (shape [..], scatter dim 1)"
  void add(const Tensor& t, int64_t dim, const std::string& where);
};

template <class T>
void probe(const T& v, int64_t dim, const std::string& where, BatchProbe& p) {
  if constexpr (nested::TensorValue<T>) {
    if (v.defined()) p.add(v, dim, where);
  } else {
    size_t i = 0;
    for_each_tensor(v, [&](const Tensor& t) {
      if (t.defined()) p.add(t, dim, where + ", tensor " + std::to_string(i));
      ++i;
    });
  }
}

/// k pieces of `v`: chunks of its tensors (along `dim`, by `sizes`), copies of everything else.
/// Flattens with for_each_tensor and rebuilds with map_tensors (Note [Nested order]).
template <class T>
std::vector<std::remove_cvref_t<T>> split_value(const T& v, int64_t dim, const IntList& sizes,
                                                const std::vector<Device>& devices) {
  using U = std::remove_cvref_t<T>;
  const size_t k = sizes.size();
  if constexpr (!nested::contains_tensors<U>()) {
    return std::vector<U>(k, v);
  } else {
    std::vector<std::vector<Tensor>> parts;  // parts[j][i]: chunk i of tensor j
    for_each_tensor(v, [&](const Tensor& t) {
      parts.push_back(t.defined() ? scatter(t, devices, dim, sizes) : std::vector<Tensor>(k));
    });
    std::vector<U> out;
    out.reserve(k);
    for (size_t i = 0; i < k; ++i) {
      size_t j = 0;
      out.push_back(map_tensors(v, [&](const Tensor&) { return std::move(parts[j++][i]); }));
    }
    return out;
  }
}

}  // namespace detail

/// Scatters an argument list for DataParallel: every tensor of an argument (however nested:
/// vectors, tuples, pairs, arrays, optionals, string maps; core/nested.h) is split along its
/// argument's dim, everything else copied to each replica. Returns one tuple of arguments per
/// chunk (possibly fewer than devices; empty when no argument holds a tensor). Every tensor
/// must have the same size along its scatter dim; the error names the arguments. A
/// PackedSequence cannot be split along a dim: pack inside forward (the FAQ's pattern).
template <class... Args>
std::vector<std::tuple<std::remove_cvref_t<Args>...>> scatter_args(const std::vector<Device>& devices,
                                                                   const ScatterSpec& spec, const Args&... args) {
  static_assert(!(nested::contains_custom<Args>() || ...),
                "DataParallel: an argument holds a PackedSequence (or another NestedTensors type), which cannot be "
                "split along a batch dim; pass the padded batch and its lengths and pack inside forward");
  using Tuple = std::tuple<std::remove_cvref_t<Args>...>;
  detail::BatchProbe p;
  [&]<size_t... I>(std::index_sequence<I...>) {
    (detail::probe(args, spec.dim_for(I), "argument " + std::to_string(I), p), ...);
  }(std::index_sequence_for<Args...>{});
  if (p.size < 0) return {};
  IntList sizes = spec.chunk_sizes ? *spec.chunk_sizes
                                   : comm::chunk_sizes_for(p.size, static_cast<int64_t>(devices.size()));
  auto parts = [&]<size_t... I>(std::index_sequence<I...>) {
    return std::make_tuple(detail::split_value(args, spec.dim_for(I), sizes, devices)...);
  }(std::index_sequence_for<Args...>{});
  std::vector<Tuple> out;
  out.reserve(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    out.push_back([&]<size_t... I>(std::index_sequence<I...>) {
      return Tuple(std::move(std::get<I>(parts)[i])...);
    }(std::index_sequence_for<Args...>{}));
  }
  return out;
}

/// Gathers replica outputs of type T: every tensor of T (however nested, core/nested.h; e.g.
/// (output, (h, c)) from an LSTM module, or a std::vector<Tensor>) is gathered across replicas,
/// position by position; values without tensors come from replica 0.
template <class T>
T gather(const std::vector<T>& outputs, Device device, int64_t dim = 0) {
  EMBER_CHECK_T(ValueError, !outputs.empty(), "gather: expected the outputs of at least one replica");
  if constexpr (nested::TensorValue<T>) {
    return gather(static_cast<const std::vector<Tensor>&>(outputs), device, dim);
  } else {
    static_assert(nested::contains_tensors<T>() && !nested::contains_custom<T>(),
                  "parallel::gather: replica outputs must hold Tensors (in tuples/pairs/vectors/arrays/optionals/maps); "
                  "a PackedSequence cannot be concatenated: unpack it with pad_packed_sequence(total_length) first");
    std::vector<std::vector<Tensor>> columns;  // columns[j][i]: tensor j of replica i
    for (size_t i = 0; i < outputs.size(); ++i) {
      std::vector<Tensor> flat = flatten_tensors(outputs[i]);
      if (i == 0) columns.resize(flat.size());
      EMBER_CHECK_T(ValueError, flat.size() == columns.size(), "gather: replica ", i, " returned ", flat.size(),
                    " tensors but replica 0 returned ", columns.size());
      for (size_t j = 0; j < flat.size(); ++j) columns[j].push_back(std::move(flat[j]));
    }
    size_t j = 0;
    return map_tensors(outputs[0], [&](const Tensor&) { return gather(columns[j++], device, dim); });
  }
}

}  // namespace ember::parallel
