// The TCPStore wire protocol, shared by the client (tcp_store.cpp) and the server
// (tcp_store_server.cpp). See Note [TCPStore protocol].
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember::parallel::detail {

// Note [TCPStore protocol]
// Every message is a frame: a u32 big-endian payload length, then the payload. A request
// payload is a u8 Op followed by its fields; a response payload is a u8 Status followed
// by the op's result fields (kOk) or a UTF-8 message (kError). Fields: bytes = u32 length
// + data; i64 = 8 bytes big-endian; u8 = one byte. Strictly one request in flight per
// connection: the client sends a request and reads its response; GET and WAIT responses
// arrive when the keys exist (the server parks the request, it never polls), so a client
// that gives up closes the connection, which cancels the parked request.
// The first frame of a connection must be kAuth {bytes magic "EMBER-STORE-1", bytes token};
// the server answers kOk followed by a u32 (its max_frame_bytes), or kAuthFailed and closes. Before authentication frames are
// capped at kMaxAuthFrameBytes, after it at the server's max_frame_bytes. A frame that is
// malformed, over the cap or of an unknown op closes that connection and nothing else.
enum class Op : uint8_t {
  kAuth = 1,
  kSet = 2,         // key, value                  -> ()
  kGet = 3,         // key                         -> value      (parks until key exists)
  kAdd = 4,         // key, i64 delta              -> i64 new value
  kCompareSet = 5,  // key, expected, desired      -> value
  kCheck = 6,       // u32 n, n keys               -> u8 all present
  kWait = 7,        // u32 n, n keys               -> ()         (parks until all exist)
  kDelete = 8,      // key                         -> u8 existed
  kNumKeys = 9,     // ()                          -> i64
  kPing = 10,       // ()                          -> ()
};

enum class Status : uint8_t { kOk = 0, kError = 1, kAuthFailed = 2 };

inline constexpr std::string_view kAuthMagic = "EMBER-STORE-1";
inline constexpr uint32_t kFrameHeaderBytes = 4;
inline constexpr uint32_t kMaxAuthFrameBytes = 4096;
inline constexpr uint32_t kDefaultMaxFrameBytes = 64u << 20;  // 64 MiB
// Keys starting with this are the store's own bookkeeping and are not counted by num_keys.
inline constexpr std::string_view kInternalKeyPrefix = "__ember_store__/";

/// Builds a frame: reserves the header, then append fields, then finish().
class FrameWriter {
 public:
  FrameWriter() : buf_(kFrameHeaderBytes, 0) {}
  FrameWriter& u8(uint8_t v);
  FrameWriter& u32(uint32_t v);
  FrameWriter& i64(int64_t v);
  FrameWriter& bytes(const void* data, size_t n);
  FrameWriter& bytes(std::string_view s) { return bytes(s.data(), s.size()); }
  FrameWriter& bytes(const std::vector<uint8_t>& v) { return bytes(v.data(), v.size()); }
  /// Writes the length header and hands over the whole frame.
  std::vector<uint8_t> finish();

 private:
  std::vector<uint8_t> buf_;
};

/// Reads fields from a payload. Every read checks the bounds and throws
/// MalformedFrame when the payload is too short or a length field overruns it.
class FrameReader {
 public:
  struct MalformedFrame {};
  FrameReader(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  uint8_t u8();
  uint32_t u32();
  int64_t i64();
  std::vector<uint8_t> bytes();
  std::string string();
  bool at_end() const { return p_ == end_; }
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }

 private:
  const uint8_t* take(size_t n);
  const uint8_t* p_;
  const uint8_t* end_;
};

uint32_t decode_u32(const uint8_t* p);

/// Compares in time that depends only on the lengths, not on where the strings differ.
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace ember::parallel::detail
