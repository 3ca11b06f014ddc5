// Byte-level messages between the DataLoader and its worker processes: a growable
// ByteWriter / bounds-checked ByteReader for plain values and strings, and length-prefixed
// frames over an AF_UNIX stream socket, each optionally carrying one file descriptor
// (SCM_RIGHTS; how batch buffers travel, see Note [Nameless batches]). Tensor-free. Each function is thread-compatible; one socket
// must not be written (or read) by two threads at once.
#pragma once
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "core/error.h"
#include "core/fd_io.h"

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
  /// The bytes not read yet.
  size_t remaining() const { return data_.size() - pos_; }

 private:
  void need(size_t n) const {
    EMBER_INTERNAL_ASSERT(n <= data_.size() - pos_, "DataLoader message truncated: need ", n,
                          " bytes at ", pos_, " of ", data_.size());
  }
  std::string_view data_;
  size_t pos_ = 0;
};

/// Writes one frame (u64 length + payload); with attached_fd >= 0, a duplicate of that
/// descriptor travels with the frame's first byte (the caller keeps its own). Returns false
/// when the peer is gone (EPIPE, ECONNRESET); never raises SIGPIPE. Throws ember::Error on
/// other failures.
bool send_frame(int fd, std::string_view payload, int attached_fd = -1);
/// Frames longer than this are refused (no DataLoader message comes near it).
inline constexpr uint64_t kMaxFrameBytes = uint64_t{1} << 32;
/// Reads one whole frame; std::nullopt on a clean end of stream or a reset peer (also when
/// the stream ends before the length it announced). Throws ember::Error for a length over
/// kMaxFrameBytes; memory grows only with the bytes that arrive. A
/// descriptor sent with the frame goes to *received_fd (close-on-exec), or is closed when
/// received_fd is null. Throws ember::Error on other failures.
std::optional<std::string> recv_frame(int fd, io::UniqueFd* received_fd = nullptr);

}  // namespace ember::data::detail
