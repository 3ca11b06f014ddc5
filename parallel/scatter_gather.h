// Differentiable scatter and gather for DataParallel. scatter splits a batch into chunks, one per
// device (ScatterBackward gathers the chunks' gradients back onto the source device); gather
// concatenates replica outputs on one device (GatherBackward sends each slice of the gradient
// back to its replica's device). The templates at the bottom scatter a whole argument list
// (each argument along its own dim) and gather structured outputs (tuples, pairs, vectors,
// nested, e.g. (output, (h, c))). Thread-safe: functions only read their inputs.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

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

template <class T>
struct is_tuple_like : std::false_type {};
template <class... Ts>
struct is_tuple_like<std::tuple<Ts...>> : std::true_type {};
template <class A, class B>
struct is_tuple_like<std::pair<A, B>> : std::true_type {};
template <class T>
struct is_vector : std::false_type {};
template <class T, class A>
struct is_vector<std::vector<T, A>> : std::true_type {};

/// True when a value of type T contains tensors that scatter splits (Tensor, vectors of them,
/// tuples/pairs holding any). Other types are given to every replica unchanged.
template <class T>
constexpr bool scatterable() {
  using U = std::remove_cvref_t<T>;
  if constexpr (std::is_same_v<U, Tensor>) {
    return true;
  } else if constexpr (is_vector<U>::value) {
    return scatterable<typename U::value_type>();
  } else if constexpr (is_tuple_like<U>::value) {
    return []<size_t... I>(std::index_sequence<I...>) {
      return (scatterable<std::tuple_element_t<I, U>>() || ...);
    }(std::make_index_sequence<std::tuple_size_v<U>>{});
  } else {
    return false;
  }
}

/// Size along the scatter dim of every defined tensor in `v`, described for error messages.
struct BatchProbe {
  int64_t size = -1;
  std::string first;  // "argument 0 (shape [..], dim 1)"
  void add(const Tensor& t, int64_t dim, const std::string& where);
};

template <class T>
void probe(const T& v, int64_t dim, const std::string& where, BatchProbe& p) {
  using U = std::remove_cvref_t<T>;
  if constexpr (std::is_same_v<U, Tensor>) {
    if (v.defined()) p.add(v, dim, where);
  } else if constexpr (is_vector<U>::value) {
    if constexpr (scatterable<typename U::value_type>()) {
      for (size_t i = 0; i < v.size(); ++i) probe(v[i], dim, where + "[" + std::to_string(i) + "]", p);
    }
  } else if constexpr (is_tuple_like<U>::value) {
    [&]<size_t... I>(std::index_sequence<I...>) {
      (probe(std::get<I>(v), dim, where + "<" + std::to_string(I) + ">", p), ...);
    }(std::make_index_sequence<std::tuple_size_v<U>>{});
  }
}

/// k pieces of `v`: chunks of its tensors (along `dim`, by `sizes`), copies of everything else.
template <class T>
std::vector<std::remove_cvref_t<T>> split_value(const T& v, int64_t dim, const IntList& sizes,
                                                const std::vector<Device>& devices) {
  using U = std::remove_cvref_t<T>;
  const size_t k = sizes.size();
  if constexpr (std::is_same_v<U, Tensor>) {
    if (!v.defined()) return std::vector<U>(k);
    return scatter(v, devices, dim, sizes);
  } else if constexpr (is_vector<U>::value && scatterable<U>()) {
    std::vector<U> out(k);
    for (auto& o : out) o.reserve(v.size());
    for (const auto& e : v) {
      auto parts = split_value(e, dim, sizes, devices);
      for (size_t i = 0; i < k; ++i) out[i].push_back(std::move(parts[i]));
    }
    return out;
  } else if constexpr (is_tuple_like<U>::value && scatterable<U>()) {
    auto parts = [&]<size_t... I>(std::index_sequence<I...>) {
      return std::make_tuple(split_value(std::get<I>(v), dim, sizes, devices)...);
    }(std::make_index_sequence<std::tuple_size_v<U>>{});
    std::vector<U> out;
    out.reserve(k);
    for (size_t i = 0; i < k; ++i) {
      out.push_back([&]<size_t... I>(std::index_sequence<I...>) {
        return U(std::move(std::get<I>(parts)[i])...);
      }(std::make_index_sequence<std::tuple_size_v<U>>{}));
    }
    return out;
  } else {
    return std::vector<U>(k, v);
  }
}

}  // namespace detail

/// Scatters an argument list for DataParallel: tensors (also inside vectors, tuples and pairs)
/// split along their argument's dim, everything else copied to each replica. Returns one tuple
/// of arguments per chunk (possibly fewer than devices; empty when no argument holds a tensor).
/// Every tensor must have the same size along its scatter dim; the error names the arguments.
template <class... Args>
std::vector<std::tuple<std::remove_cvref_t<Args>...>> scatter_args(const std::vector<Device>& devices,
                                                                   const ScatterSpec& spec, const Args&... args) {
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

/// Gathers replica outputs of type T: a Tensor, or tuples/pairs/vectors of gatherable values,
/// nested, element by element (e.g. (output, (h, c)) from an LSTM module).
template <class T>
T gather(const std::vector<T>& outputs, Device device, int64_t dim = 0) {
  EMBER_CHECK_T(ValueError, !outputs.empty(), "gather: expected the outputs of at least one replica");
  if constexpr (detail::is_tuple_like<T>::value) {
    return [&]<size_t... I>(std::index_sequence<I...>) {
      return T(gather(
          [&] {
            std::vector<std::remove_cvref_t<std::tuple_element_t<I, T>>> col;
            col.reserve(outputs.size());
            for (const auto& o : outputs) col.push_back(std::get<I>(o));
            return col;
          }(),
          device, dim)...);
    }(std::make_index_sequence<std::tuple_size_v<T>>{});
  } else if constexpr (detail::is_vector<T>::value) {
    T out;
    for (size_t i = 0; i < outputs.size(); ++i) {
      EMBER_CHECK_T(ValueError, outputs[i].size() == outputs[0].size(), "gather: replica ", i, " returned ",
                    outputs[i].size(), " values but replica 0 returned ", outputs[0].size());
    }
    for (size_t j = 0; j < outputs[0].size(); ++j) {
      std::vector<typename T::value_type> col;
      col.reserve(outputs.size());
      for (const auto& o : outputs) col.push_back(o[j]);
      out.push_back(gather(col, device, dim));
    }
    return out;
  } else {
    static_assert(std::is_same_v<T, Tensor>,
                  "parallel::gather: replica outputs must be Tensors or tuples/pairs/vectors of them");
    return gather(static_cast<const std::vector<Tensor>&>(outputs), device, dim);
  }
}

}  // namespace ember::parallel
