// BatchCodec<T>: how a collated batch crosses from a worker process to the DataLoader. A batch
// is flattened into a list of tensors (which travel through shared memory, see
// data/detail/shm_segment.h) plus a small byte string for its structure (vector lengths, map
// keys, strings, plain numbers); the parent rebuilds the same value around tensors that view
// the shared memory without a copy. Supported: Tensor, arithmetic types, std::string, and
// std::vector / std::array / std::pair / std::tuple / std::map<std::string, ...> / std::optional
// of supported types, nested freely. Specialize BatchCodec for your own batch types.
// Encoders and decoders are single-threaded values.
#pragma once
#include <array>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

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
    EMBER_INTERNAL_ASSERT(next_ < tensors_.size(), "batch decoder ran out of tensors");
    return std::move(tensors_[next_++]);
  }
  template <typename T>
  T get() { return meta_.get<T>(); }
  std::string get_string() { return meta_.get_string(); }

 private:
  std::vector<Tensor> tensors_;
  size_t next_ = 0;
  detail::ByteReader meta_;
};

template <typename T, typename Enable = void>
struct BatchCodec {
  static_assert(sizeof(T) == 0,
                "ember::data::BatchCodec: this batch type cannot be sent from a worker process; use "
                "Tensor, numbers, strings, std::vector/array/pair/tuple/map<std::string,...>/optional of "
                "them, or specialize ember::data::BatchCodec<T>");
};

template <>
struct BatchCodec<Tensor> {
  static void encode(const Tensor& t, BatchEncoder& e) { e.add_tensor(t); }
  static Tensor decode(BatchDecoder& d) { return d.next_tensor(); }
};

template <typename T>
struct BatchCodec<T, std::enable_if_t<std::is_arithmetic_v<T> || std::is_enum_v<T>>> {
  static void encode(const T& v, BatchEncoder& e) { e.put(v); }
  static T decode(BatchDecoder& d) { return d.get<T>(); }
};

template <>
struct BatchCodec<std::string> {
  static void encode(const std::string& s, BatchEncoder& e) { e.put_string(s); }
  static std::string decode(BatchDecoder& d) { return d.get_string(); }
};

template <typename T, typename A>
struct BatchCodec<std::vector<T, A>> {
  static void encode(const std::vector<T, A>& v, BatchEncoder& e) {
    e.put<uint64_t>(v.size());
    for (const auto& x : v) BatchCodec<T>::encode(x, e);
  }
  static std::vector<T, A> decode(BatchDecoder& d) {
    auto n = d.get<uint64_t>();
    std::vector<T, A> v;
    v.reserve(n);
    for (uint64_t i = 0; i < n; ++i) v.push_back(BatchCodec<T>::decode(d));
    return v;
  }
};

template <typename T, size_t N>
struct BatchCodec<std::array<T, N>> {
  static void encode(const std::array<T, N>& v, BatchEncoder& e) {
    for (const auto& x : v) BatchCodec<T>::encode(x, e);
  }
  static std::array<T, N> decode(BatchDecoder& d) {
    return [&]<size_t... I>(std::index_sequence<I...>) {
      return std::array<T, N>{((void)I, BatchCodec<T>::decode(d))...};
    }(std::make_index_sequence<N>{});
  }
};

template <typename A, typename B>
struct BatchCodec<std::pair<A, B>> {
  static void encode(const std::pair<A, B>& p, BatchEncoder& e) {
    BatchCodec<A>::encode(p.first, e);
    BatchCodec<B>::encode(p.second, e);
  }
  static std::pair<A, B> decode(BatchDecoder& d) {
    A a = BatchCodec<A>::decode(d);
    B b = BatchCodec<B>::decode(d);
    return {std::move(a), std::move(b)};
  }
};

template <typename... Ts>
struct BatchCodec<std::tuple<Ts...>> {
  static void encode(const std::tuple<Ts...>& t, BatchEncoder& e) {
    std::apply([&](const auto&... x) { (BatchCodec<std::decay_t<decltype(x)>>::encode(x, e), ...); }, t);
  }
  static std::tuple<Ts...> decode(BatchDecoder& d) {
    // Braced initialization evaluates left to right.
    return std::tuple<Ts...>{BatchCodec<Ts>::decode(d)...};
  }
};

template <typename T, typename C, typename A>
struct BatchCodec<std::map<std::string, T, C, A>> {
  static void encode(const std::map<std::string, T, C, A>& m, BatchEncoder& e) {
    e.put<uint64_t>(m.size());
    for (const auto& [k, v] : m) {
      e.put_string(k);
      BatchCodec<T>::encode(v, e);
    }
  }
  static std::map<std::string, T, C, A> decode(BatchDecoder& d) {
    auto n = d.get<uint64_t>();
    std::map<std::string, T, C, A> m;
    for (uint64_t i = 0; i < n; ++i) {
      std::string k = d.get_string();
      m.emplace(std::move(k), BatchCodec<T>::decode(d));
    }
    return m;
  }
};

template <typename T>
struct BatchCodec<std::optional<T>> {
  static void encode(const std::optional<T>& v, BatchEncoder& e) {
    e.put<uint8_t>(v ? 1 : 0);
    if (v) BatchCodec<T>::encode(*v, e);
  }
  static std::optional<T> decode(BatchDecoder& d) {
    if (d.get<uint8_t>() == 0) return std::nullopt;
    return BatchCodec<T>::decode(d);
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
