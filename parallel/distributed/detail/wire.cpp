#include "parallel/distributed/detail/wire.h"

#include <cstring>

namespace ember::parallel::detail {

FrameWriter& FrameWriter::u8(uint8_t v) {
  buf_.push_back(v);
  return *this;
}

FrameWriter& FrameWriter::u32(uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) buf_.push_back(static_cast<uint8_t>(v >> s));
  return *this;
}

FrameWriter& FrameWriter::i64(int64_t v) {
  const uint64_t u = static_cast<uint64_t>(v);
  for (int s = 56; s >= 0; s -= 8) buf_.push_back(static_cast<uint8_t>(u >> s));
  return *this;
}

FrameWriter& FrameWriter::bytes(const void* data, size_t n) {
  u32(static_cast<uint32_t>(n));
  const auto* p = static_cast<const uint8_t*>(data);
  buf_.insert(buf_.end(), p, p + n);
  return *this;
}

std::vector<uint8_t> FrameWriter::finish() {
  const uint32_t n = static_cast<uint32_t>(buf_.size() - kFrameHeaderBytes);
  for (int i = 0; i < 4; ++i) buf_[i] = static_cast<uint8_t>(n >> (24 - 8 * i));
  return std::move(buf_);
}

uint32_t decode_u32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

const uint8_t* FrameReader::take(size_t n) {
  if (remaining() < n) throw MalformedFrame{};
  const uint8_t* p = p_;
  p_ += n;
  return p;
}

uint8_t FrameReader::u8() { return *take(1); }

uint32_t FrameReader::u32() { return decode_u32(take(4)); }

int64_t FrameReader::i64() {
  const uint8_t* p = take(8);
  uint64_t u = 0;
  for (int i = 0; i < 8; ++i) u = (u << 8) | p[i];
  return static_cast<int64_t>(u);
}

std::vector<uint8_t> FrameReader::bytes() {
  const uint32_t n = u32();
  const uint8_t* p = take(n);
  return {p, p + n};
}

std::string FrameReader::string() {
  const uint32_t n = u32();
  const uint8_t* p = take(n);
  return {reinterpret_cast<const char*>(p), n};
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Walk the expected string (b) in full whatever a holds; fold the length difference in.
  volatile uint8_t diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < b.size(); ++i) {
    const uint8_t x = i < a.size() ? static_cast<uint8_t>(a[i]) : 0;
    diff = diff | static_cast<uint8_t>(x ^ static_cast<uint8_t>(b[i]));
  }
  return diff == 0;
}

}  // namespace ember::parallel::detail
