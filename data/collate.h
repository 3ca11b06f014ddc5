// DefaultCollate: turns a list of samples into a batch as torch.utils.data.default_collate
// does: tensors are stacked along a new first dimension; numbers become a 1-D tensor (bool ->
// bool, integers -> int64, float -> float32, double -> float64); strings stay a list; and
// std::vector / std::array / std::pair / std::tuple / std::map<std::string, ...> (the container
// kinds of core/nested.h) are collated element by element (a batch of pairs is a pair of
// batches). Stateless; thread-safe.
#pragma once
#include <array>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/nested.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/tensor.h"

namespace ember::data {

namespace detail {
// Column `i` of a batch of indexable samples.
template <typename T, typename Sample, typename Get>
std::vector<T> column(std::vector<Sample>& samples, Get get) {
  std::vector<T> col;
  col.reserve(samples.size());
  for (auto& s : samples) col.push_back(std::move(get(s)));
  return col;
}
// Numbers become a 1-D tensor: bool -> bool, integers -> int64, float -> float32, else float64.
template <typename T>
Tensor collate_numbers(std::vector<T>& samples) {
  const int64_t n = static_cast<int64_t>(samples.size());
  if constexpr (std::is_same_v<T, bool>) {
    Tensor out = empty({n}, TensorOptions(kBool));
    bool* p = out.data_ptr<bool>();
    for (int64_t i = 0; i < n; ++i) p[i] = samples[i];
    return out;
  } else if constexpr (std::is_integral_v<T>) {
    Tensor out = empty({n}, TensorOptions(kInt64));
    int64_t* p = out.data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int64_t>(samples[i]);
    return out;
  } else if constexpr (std::is_same_v<T, float>) {
    Tensor out = empty({n}, TensorOptions(kFloat32));
    float* p = out.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) p[i] = samples[i];
    return out;
  } else {
    Tensor out = empty({n}, TensorOptions(kFloat64));
    double* p = out.data_ptr<double>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<double>(samples[i]);
    return out;
  }
}
}  // namespace detail

/// Collates a batch of samples of type T. The containers are the kinds of core/nested.h
/// (vector, array, pair/tuple, string-keyed map), collated element by element; Tensor,
/// numbers and strings are the leaves. Specialize Collate<T> for your own sample types.
template <typename T, typename Enable = void>
struct Collate {
  static auto apply(std::vector<T>& samples) {
    if constexpr (nested::TensorValue<T>) {
      EMBER_CHECK_T(ValueError, !samples.empty(), "default_collate: empty batch");
      return native::stack(samples, 0);
    } else if constexpr (std::is_arithmetic_v<T>) {
      return detail::collate_numbers(samples);
    } else if constexpr (std::is_same_v<T, std::string>) {
      return std::move(samples);  // strings stay a list
    } else if constexpr (nested::VectorValue<T>) {
      return apply_vector(samples);
    } else if constexpr (nested::ArrayValue<T> || nested::TupleValue<T>) {
      return apply_tuple(samples);
    } else if constexpr (nested::StringMapValue<T>) {
      return apply_map(samples);
    } else {
      static_assert(sizeof(T) == 0,
                    "ember::data::DefaultCollate: no collation for this sample type; use Tensor, numbers, "
                    "std::string, or std::vector/array/pair/tuple/map<std::string,...> of them, or pass your own "
                    "collate function to the DataLoader");
    }
  }

 private:
  static auto apply_vector(std::vector<T>& samples) {
    using E = typename T::value_type;
    using Out = decltype(Collate<E>::apply(std::declval<std::vector<E>&>()));
    std::vector<Out> out;
    if (samples.empty()) return out;
    const size_t width = samples[0].size();
    for (size_t j = 0; j < samples.size(); ++j) {
      EMBER_CHECK_T(ValueError, samples[j].size() == width,
                    "default_collate: each element in list of batch should be of equal size; sample 0 has ", width,
                    " elements, sample ", j, " has ", samples[j].size());
    }
    out.reserve(width);
    for (size_t i = 0; i < width; ++i) {
      auto col = detail::column<E>(samples, [i](auto& s) -> E& { return s[i]; });
      out.push_back(Collate<E>::apply(col));
    }
    return out;
  }

  template <size_t J>
  using Out = decltype(Collate<std::tuple_element_t<J, T>>::apply(
      std::declval<std::vector<std::tuple_element_t<J, T>>&>()));

  // A batch of pairs/tuples/arrays is a pair/tuple/array of batches; braced initialization
  // runs the columns in order.
  static auto apply_tuple(std::vector<T>& samples) {
    return [&]<size_t... I>(std::index_sequence<I...>) {
      auto one = [&]<size_t J>(std::integral_constant<size_t, J>) {
        using E = std::tuple_element_t<J, T>;
        auto col = detail::column<E>(samples, [](auto& s) -> E& { return std::get<J>(s); });
        return Collate<E>::apply(col);
      };
      if constexpr (nested::ArrayValue<T>) {
        return std::array<Out<0>, sizeof...(I)>{one(std::integral_constant<size_t, I>{})...};
      } else if constexpr (requires { typename T::first_type; }) {
        return std::pair<Out<0>, Out<1>>{one(std::integral_constant<size_t, 0>{}), one(std::integral_constant<size_t, 1>{})};
      } else {
        return std::tuple<Out<I>...>{one(std::integral_constant<size_t, I>{})...};
      }
    }(std::make_index_sequence<std::tuple_size_v<T>>{});
  }

  static auto apply_map(std::vector<T>& samples) {
    using E = typename T::mapped_type;
    using Out = decltype(Collate<E>::apply(std::declval<std::vector<E>&>()));
    std::map<std::string, Out> out;
    if (samples.empty()) return out;
    for (auto& [key, unused] : samples[0]) {
      (void)unused;
      std::vector<E> col;
      col.reserve(samples.size());
      for (size_t j = 0; j < samples.size(); ++j) {
        auto it = samples[j].find(key);
        EMBER_CHECK_T(ValueError, it != samples[j].end(), "default_collate: sample ", j, " has no key '", key,
                      "' (sample 0 has it)");
        col.push_back(std::move(it->second));
      }
      out.emplace(key, Collate<E>::apply(col));
    }
    return out;
  }
};

/// Stacks / gathers one batch. Samples may be moved from.
struct DefaultCollate {
  template <typename Sample>
  auto operator()(std::vector<Sample> samples) const {
    return Collate<Sample>::apply(samples);
  }
};

}  // namespace ember::data
