// BatchCodec<T>: how a collated batch crosses from a worker process to the DataLoader. A batch
// is flattened into a list of tensors (which travel through shared memory, see
// data/detail/shm_segment.h) plus a small byte string for its structure (vector lengths, map
// keys, strings, plain numbers); the parent rebuilds the same value around tensors that view
// the shared memory without a copy. Supported: Tensor, arithmetic types, std::string, and the
// nested kinds of core/nested.h (std::vector / std::array / std::pair / std::tuple /
// std::map<std::string, ...> / std::optional, NestedTensors types such as PackedSequence),
// nested freely. Specialize BatchCodec for your own batch types.
// Encoders and decoders are single-threaded values.
#pragma once
#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/nested.h"
#include "core/tensor.h"
#include "data/detail/wire.h"

namespace ember::data {

/// The flattened form of one batch.
class BatchEncoder {
 public:
  void add_tensor(const Tensor& t) {
    meta_.put<uint8_t>(t.defined() ? 1 : 0);
    if (t.defined()) tensors_.push_back(t);
  }
  template <typename T>
  void put(const T& v) { meta_.put(v); }
  void put_string(const std::string& s) { meta_.put_string(s); }

  const std::vector<Tensor>& tensors() const { return tensors_; }
  std::vector<Tensor>& tensors() { return tensors_; }
  const std::string& meta() const { return meta_.bytes(); }

 private:
  std::vector<Tensor> tensors_;
  detail::ByteWriter meta_;
};

/// Reads back what a BatchEncoder wrote, in the same order.
class BatchDecoder {
 public:
  BatchDecoder(std::vector<Tensor> tensors, std::string_view meta) : tensors_(std::move(tensors)), meta_(meta) {}
  Tensor next_tensor() {
    if (meta_.get<uint8_t>() == 0) return Tensor();
    EMBER_CHECK_T(ValueError, next_ < tensors_.size(), "DataLoader batch: the structure bytes ask for more than the ",
                  tensors_.size(), " tensors that arrived");
    return std::move(tensors_[next_++]);
  }
  /// Structure bytes not read yet: a bound for the count of what follows when reserving.
  size_t remaining() const { return meta_.remaining(); }
  template <typename T>
  T get() { return meta_.get<T>(); }
  std::string get_string() { return meta_.get_string(); }

 private:
  std::vector<Tensor> tensors_;
  size_t next_ = 0;
  detail::ByteReader meta_;
};

/// Encodes / decodes one value of type T. The containers are the kinds of core/nested.h
/// (vector, array, pair/tuple, optional, string-keyed map, and NestedTensors types such as
/// PackedSequence, sent as their tensors); Tensor, numbers, enums and strings are the leaves.
/// Specialize BatchCodec<T> for your own batch types.
template <typename T, typename Enable = void>
struct BatchCodec {
  static void encode(const T& v, BatchEncoder& e) {
    if constexpr (nested::TensorValue<T>) {
      e.add_tensor(v);
    } else if constexpr (std::is_arithmetic_v<T> || std::is_enum_v<T>) {
      e.put(v);
    } else if constexpr (std::is_same_v<T, std::string>) {
      e.put_string(v);
    } else if constexpr (nested::CustomValue<T>) {
      for_each_tensor(v, [&](const Tensor& t) { e.add_tensor(t); });
    } else if constexpr (nested::VectorValue<T>) {
      e.put<uint64_t>(v.size());
      for (const auto& x : v) BatchCodec<typename T::value_type>::encode(x, e);
    } else if constexpr (nested::ArrayValue<T> || nested::TupleValue<T>) {
      std::apply([&](const auto&... x) { (BatchCodec<std::decay_t<decltype(x)>>::encode(x, e), ...); }, v);
    } else if constexpr (nested::OptionalValue<T>) {
      e.put<uint8_t>(v ? 1 : 0);
      if (v) BatchCodec<typename T::value_type>::encode(*v, e);
    } else if constexpr (nested::StringMapValue<T>) {
      e.put<uint64_t>(v.size());
      for (const auto& [k, x] : v) {
        e.put_string(k);
        BatchCodec<typename T::mapped_type>::encode(x, e);
      }
    } else {
      static_assert(sizeof(T) == 0,
                    "ember::data::BatchCodec: this batch type cannot be sent from a worker process; use "
                    "Tensor, numbers, strings, std::vector/array/pair/tuple/map<std::string,...>/optional of "
                    "them, a NestedTensors type, or specialize ember::data::BatchCodec<T>");
    }
  }

  static T decode(BatchDecoder& d) {
    if constexpr (nested::TensorValue<T>) {
      return d.next_tensor();
    } else if constexpr (std::is_arithmetic_v<T> || std::is_enum_v<T>) {
      return d.get<T>();
    } else if constexpr (std::is_same_v<T, std::string>) {
      return d.get_string();
    } else if constexpr (nested::CustomValue<T>) {
      return map_tensors(T{}, [&](const Tensor&) { return d.next_tensor(); });  // Note [Nested order]
    } else if constexpr (nested::VectorValue<T>) {
      auto n = d.get<uint64_t>();
      T v;
      // n came from another process: reserve no more than the bytes that could describe it.
      v.reserve(static_cast<size_t>(std::min<uint64_t>(n, d.remaining())));
      for (uint64_t i = 0; i < n; ++i) v.push_back(BatchCodec<typename T::value_type>::decode(d));
      return v;
    } else if constexpr (nested::ArrayValue<T> || nested::TupleValue<T>) {
      // Braced initialization evaluates left to right.
      return [&]<size_t... I>(std::index_sequence<I...>) {
        return T{BatchCodec<std::tuple_element_t<I, T>>::decode(d)...};
      }(std::make_index_sequence<std::tuple_size_v<T>>{});
    } else if constexpr (nested::OptionalValue<T>) {
      if (d.get<uint8_t>() == 0) return T();
      return T(BatchCodec<typename T::value_type>::decode(d));
    } else if constexpr (nested::StringMapValue<T>) {
      auto n = d.get<uint64_t>();
      T m;
      for (uint64_t i = 0; i < n; ++i) {
        std::string k = d.get_string();
        m.emplace(std::move(k), BatchCodec<typename T::mapped_type>::decode(d));
      }
      return m;
    } else {
      static_assert(sizeof(T) == 0, "ember::data::BatchCodec: this batch type cannot be decoded");
    }
  }
};

/// Flattens a batch (see BatchCodec).
template <typename T>
BatchEncoder encode_batch(const T& batch) {
  BatchEncoder e;
  BatchCodec<T>::encode(batch, e);
  return e;
}
/// Rebuilds a batch from its tensors and structure bytes.
template <typename T>
T decode_batch(std::vector<Tensor> tensors, std::string_view meta) {
  BatchDecoder d(std::move(tensors), meta);
  return BatchCodec<T>::decode(d);
}

}  // namespace ember::data
