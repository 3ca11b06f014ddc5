// DefaultCollate: turns a list of samples into a batch as torch.utils.data.default_collate
// does: tensors are stacked along a new first dimension; numbers become a 1-D tensor (bool ->
// bool, integers -> int64, float -> float32, double -> float64); strings stay a list; and
// std::vector / std::array / std::pair / std::tuple / std::map<std::string, ...> are collated
// element by element (a batch of pairs is a pair of batches). Stateless; thread-safe.
#pragma once
#include <array>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/tensor.h"

namespace ember::data {

template <typename T, typename Enable = void>
struct Collate {
  static_assert(sizeof(T) == 0,
                "ember::data::DefaultCollate: no collation for this sample type; use Tensor, numbers, "
                "std::string, or std::vector/array/pair/tuple/map<std::string,...> of them, or pass your own "
                "collate function to the DataLoader");
};

/// Stacks / gathers one batch. Samples may be moved from.
struct DefaultCollate {
  template <typename Sample>
  auto operator()(std::vector<Sample> samples) const {
    return Collate<Sample>::apply(samples);
  }
};

template <>
struct Collate<Tensor> {
  static Tensor apply(std::vector<Tensor>& samples) {
    EMBER_CHECK_T(ValueError, !samples.empty(), "default_collate: empty batch");
    return native::stack(samples, 0);
  }
};

template <typename T>
struct Collate<T, std::enable_if_t<std::is_arithmetic_v<T>>> {
  static Tensor apply(std::vector<T>& samples) {
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
};

template <>
struct Collate<std::string> {
  static std::vector<std::string> apply(std::vector<std::string>& samples) { return std::move(samples); }
};

namespace detail {
// Column `i` of a batch of indexable samples.
template <typename T, typename Sample, typename Get>
std::vector<T> column(std::vector<Sample>& samples, Get get) {
  std::vector<T> col;
  col.reserve(samples.size());
  for (auto& s : samples) col.push_back(std::move(get(s)));
  return col;
}
}  // namespace detail

template <typename T, typename A>
struct Collate<std::vector<T, A>> {
  static auto apply(std::vector<std::vector<T, A>>& samples) {
    using Out = decltype(Collate<T>::apply(std::declval<std::vector<T>&>()));
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
      auto col = detail::column<T>(samples, [i](auto& s) -> T& { return s[i]; });
      out.push_back(Collate<T>::apply(col));
    }
    return out;
  }
};

template <typename T, size_t N>
struct Collate<std::array<T, N>> {
  static auto apply(std::vector<std::array<T, N>>& samples) {
    return [&]<size_t... I>(std::index_sequence<I...>) {
      return std::array{[&] {
        auto col = detail::column<T>(samples, [](auto& s) -> T& { return s[I]; });
        return Collate<T>::apply(col);
      }()...};
    }(std::make_index_sequence<N>{});
  }
};

template <typename A, typename B>
struct Collate<std::pair<A, B>> {
  static auto apply(std::vector<std::pair<A, B>>& samples) {
    auto first = detail::column<A>(samples, [](auto& s) -> A& { return s.first; });
    auto second = detail::column<B>(samples, [](auto& s) -> B& { return s.second; });
    auto a = Collate<A>::apply(first);
    auto b = Collate<B>::apply(second);
    return std::make_pair(std::move(a), std::move(b));
  }
};

template <typename... Ts>
struct Collate<std::tuple<Ts...>> {
  static auto apply(std::vector<std::tuple<Ts...>>& samples) {
    return [&]<size_t... I>(std::index_sequence<I...>) {
      using Tup = std::tuple<Ts...>;
      // Braced initialization runs the columns in order.
      return std::tuple<decltype(Collate<std::tuple_element_t<I, Tup>>::apply(
          std::declval<std::vector<std::tuple_element_t<I, Tup>>&>()))...>{[&] {
        using E = std::tuple_element_t<I, Tup>;
        auto col = detail::column<E>(samples, [](auto& s) -> E& { return std::get<I>(s); });
        return Collate<E>::apply(col);
      }()...};
    }(std::index_sequence_for<Ts...>{});
  }
};

template <typename T, typename C, typename A>
struct Collate<std::map<std::string, T, C, A>> {
  static auto apply(std::vector<std::map<std::string, T, C, A>>& samples) {
    using Out = decltype(Collate<T>::apply(std::declval<std::vector<T>&>()));
    std::map<std::string, Out> out;
    if (samples.empty()) return out;
    for (auto& [key, unused] : samples[0]) {
      (void)unused;
      std::vector<T> col;
      col.reserve(samples.size());
      for (size_t j = 0; j < samples.size(); ++j) {
        auto it = samples[j].find(key);
        EMBER_CHECK_T(ValueError, it != samples[j].end(), "default_collate: sample ", j, " has no key '", key,
                      "' (sample 0 has it)");
        col.push_back(std::move(it->second));
      }
      out.emplace(key, Collate<T>::apply(col));
    }
    return out;
  }
};

}  // namespace ember::data
