// ProtoWriter: the protocol-buffers wire format, written by hand for the few messages an event
// file holds (see tensorboard/event_encoding.h). Appends fields to a byte string; the caller
// writes them in field-number order. A value type; not thread-safe.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace ember::tensorboard::detail {

class ProtoWriter {
 public:
  /// Wire type 0: int32, int64, uint64, enum and bool fields (a negative value takes 10 bytes).
  void varint(int field, uint64_t value);
  /// Wire type 1: a double field.
  void float64(int field, double value);
  /// Wire type 5: a float field.
  void float32(int field, float value);
  /// Wire type 2: a string, bytes or embedded-message field.
  void bytes(int field, std::string_view value);
  /// Wire type 2: a packed repeated double field (omitted when empty, as proto3 writes it).
  void packed_float64(int field, std::span<const double> values);

  const std::string& str() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  void tag(int field, int wire_type);
  void raw_varint(uint64_t v);
  void raw_fixed(uint64_t bits, int num_bytes);

  std::string out_;
};

}  // namespace ember::tensorboard::detail
