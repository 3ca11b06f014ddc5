// Byte-level messages between the DataLoader and its worker processes: a growable
// ByteWriter / bounds-checked ByteReader for plain values and strings, and length-prefixed
// frames over a stream socket. Tensor-free. Each function is thread-compatible; one socket
// must not be written (or read) by two threads at once.
#pragma once
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "core/error.h"

namespace ember::data::detail {

class ByteWriter {
 public:
  template <typename T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    buf_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void put_string(std::string_view s) {
    put<uint64_t>(s.size());
    buf_.append(s.data(), s.size());
  }
  void put_bytes(const void* p, size_t n) { buf_.append(static_cast<const char*>(p), n); }
  const std::string& bytes() const { return buf_; }
  std::string take() { return std::move(buf_); }

 private:
  std::string buf_;
};

/// Reads what a ByteWriter wrote; throws ember::Error (naming the message) on truncation.
class ByteReader {
 public:
  explicit ByteReader(std::string_view data) : data_(data) {}
  template <typename T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    need(sizeof(T));
    T v;
    std::memcpy(&v, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string get_string() {
    auto n = get<uint64_t>();
    need(n);
    std::string s(data_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  const char* get_bytes(size_t n) {
    need(n);
    const char* p = data_.data() + pos_;
    pos_ += n;
    return p;
  }
  bool done() const { return pos_ == data_.size(); }

 private:
  void need(size_t n) const {
    EMBER_INTERNAL_ASSERT(n <= data_.size() - pos_, "DataLoader message truncated: need ", n,
                          " bytes at ", pos_, " of ", data_.size());
  }
  std::string_view data_;
  size_t pos_ = 0;
};

/// Writes one frame (u64 length + payload). Returns false when the peer is gone (EPIPE,
/// ECONNRESET); never raises SIGPIPE. Throws ember::Error on other failures.
bool send_frame(int fd, std::string_view payload);
/// Reads one whole frame; std::nullopt on a clean end of stream or a reset peer.
std::optional<std::string> recv_frame(int fd);

}  // namespace ember::data::detail
