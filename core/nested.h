// Nested values holding tensors: the one walker for "a value with tensors somewhere inside".
// It knows Tensor, std::pair / std::tuple / std::array, std::vector, std::optional,
// std::map<std::string, ...>, and any struct that opts in through the NestedTensors<T>
// customization point (nn's PackedSequence does, in nn/utils/rnn.h: core does not know it).
// Everything else is a leaf without tensors. for_each_tensor and map_tensors visit tensors in
// one fixed order (Note [Nested order]); data/collate.h, data/batch_codec.h,
// parallel/scatter_gather.h and DistributedDataParallel dispatch on the kinds defined here.
// Header-only, stateless, thread-safe as long as the callbacks are.
#pragma once
#include <array>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/tensor.h"

// Note [Nested order]
// Tensors are visited depth first, in the order a reader sees them: pair/tuple/array elements
// and vector elements by index, map entries by key order, an optional's value when present, a
// custom type's tensors in the order its NestedTensors::for_each lists them. map_tensors calls
// its function in exactly that order, so a caller may flatten a value with for_each_tensor,
// transform the flat list, and put it back with map_tensors and a running index (scatter and
// gather do). Undefined tensors are visited like defined ones (the callback decides).

namespace ember {

/// Customization point: specialize for a struct that holds tensors, with
///
///     static constexpr bool enabled = true;
///     template <class F> static void for_each(const T& v, F&& f);  // f(const Tensor&) per tensor
///     template <class F> static T map(const T& v, F&& f);          // same order (Note [Nested order])
///
template <class T, class Enable = void>
struct NestedTensors {
  static constexpr bool enabled = false;
};

namespace nested {

template <class T>
struct is_vector : std::false_type {};
template <class T, class A>
struct is_vector<std::vector<T, A>> : std::true_type {};
template <class T>
struct is_array : std::false_type {};
template <class T, size_t N>
struct is_array<std::array<T, N>> : std::true_type {};
template <class T>
struct is_tuple_like : std::false_type {};
template <class... Ts>
struct is_tuple_like<std::tuple<Ts...>> : std::true_type {};
template <class A, class B>
struct is_tuple_like<std::pair<A, B>> : std::true_type {};
template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};
template <class T>
struct is_string_map : std::false_type {};
template <class T, class C, class A>
struct is_string_map<std::map<std::string, T, C, A>> : std::true_type {};

/// The kinds of nested values; every walker dispatches on these and nothing else.
template <class T>
concept TensorValue = std::is_same_v<std::remove_cvref_t<T>, Tensor>;
template <class T>
concept CustomValue = NestedTensors<std::remove_cvref_t<T>>::enabled;
template <class T>
concept VectorValue = is_vector<std::remove_cvref_t<T>>::value;
template <class T>
concept ArrayValue = is_array<std::remove_cvref_t<T>>::value;
template <class T>
concept TupleValue = is_tuple_like<std::remove_cvref_t<T>>::value;
template <class T>
concept OptionalValue = is_optional<std::remove_cvref_t<T>>::value;
template <class T>
concept StringMapValue = is_string_map<std::remove_cvref_t<T>>::value;

/// Whether some leaf of type T (a Tensor, a custom value or a plain leaf) satisfies `Leaf<U>`.
template <template <class> class Leaf, class T>
constexpr bool any_leaf() {
  using U = std::remove_cvref_t<T>;
  if constexpr (TensorValue<U> || CustomValue<U>) {
    return Leaf<U>::value;
  } else if constexpr (VectorValue<U> || ArrayValue<U> || OptionalValue<U>) {
    return any_leaf<Leaf, typename U::value_type>();
  } else if constexpr (StringMapValue<U>) {
    return any_leaf<Leaf, typename U::mapped_type>();
  } else if constexpr (TupleValue<U>) {
    return []<size_t... I>(std::index_sequence<I...>) {
      return (any_leaf<Leaf, std::tuple_element_t<I, U>>() || ...);
    }(std::make_index_sequence<std::tuple_size_v<U>>{});
  } else {
    return Leaf<U>::value;
  }
}

template <class U>
struct holds_tensors : std::bool_constant<TensorValue<U> || CustomValue<U>> {};
template <class U>
struct is_custom : std::bool_constant<CustomValue<U>> {};

/// Whether a value of type T can hold a tensor (a vector of ints cannot; a tuple with a Tensor can).
template <class T>
constexpr bool contains_tensors() {
  return any_leaf<holds_tensors, T>();
}
/// Whether T holds a NestedTensors customized value somewhere (e.g. a PackedSequence).
template <class T>
constexpr bool contains_custom() {
  return any_leaf<is_custom, T>();
}

}  // namespace nested

/// Calls f(const Tensor&) for every tensor in `v` (Note [Nested order]).
template <class T, class F>
void for_each_tensor(const T& v, F&& f) {
  using U = std::remove_cvref_t<T>;
  if constexpr (!nested::contains_tensors<U>()) {
    return;
  } else if constexpr (nested::TensorValue<U>) {
    f(v);
  } else if constexpr (nested::CustomValue<U>) {
    NestedTensors<U>::for_each(v, f);
  } else if constexpr (nested::OptionalValue<U>) {
    if (v) for_each_tensor(*v, f);
  } else if constexpr (nested::VectorValue<U> || nested::ArrayValue<U>) {
    for (const auto& e : v) for_each_tensor(e, f);
  } else if constexpr (nested::TupleValue<U>) {
    std::apply([&](const auto&... e) { (for_each_tensor(e, f), ...); }, v);
  } else if constexpr (nested::StringMapValue<U>) {
    for (const auto& [k, e] : v) for_each_tensor(e, f);
  }
}

/// A copy of `v` with every tensor t replaced by f(t), called in Note [Nested order]; values
/// without tensors are copied.
template <class T, class F>
std::remove_cvref_t<T> map_tensors(const T& v, F&& f) {
  using U = std::remove_cvref_t<T>;
  if constexpr (!nested::contains_tensors<U>()) {
    return v;
  } else if constexpr (nested::TensorValue<U>) {
    return f(v);
  } else if constexpr (nested::CustomValue<U>) {
    return NestedTensors<U>::map(v, f);
  } else if constexpr (nested::OptionalValue<U>) {
    return v ? U(map_tensors(*v, f)) : U();
  } else if constexpr (nested::VectorValue<U>) {
    U out;
    out.reserve(v.size());
    for (const auto& e : v) out.push_back(map_tensors(e, f));
    return out;
  } else if constexpr (nested::ArrayValue<U> || nested::TupleValue<U>) {
    // Braced initialization evaluates left to right.
    return [&]<size_t... I>(std::index_sequence<I...>) {
      return U{map_tensors(std::get<I>(v), f)...};
    }(std::make_index_sequence<std::tuple_size_v<U>>{});
  } else if constexpr (nested::StringMapValue<U>) {
    U out;
    for (const auto& [k, e] : v) out.emplace(k, map_tensors(e, f));
    return out;
  }
}

/// The tensors of `v`, flattened in Note [Nested order].
template <class T>
std::vector<Tensor> flatten_tensors(const T& v) {
  std::vector<Tensor> out;
  for_each_tensor(v, [&](const Tensor& t) { out.push_back(t); });
  return out;
}

}  // namespace ember
