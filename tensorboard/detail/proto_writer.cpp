#include "tensorboard/detail/proto_writer.h"

#include <bit>

namespace ember::tensorboard::detail {

void ProtoWriter::raw_varint(uint64_t v) {
  while (v >= 0x80) {
    out_.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out_.push_back(static_cast<char>(v));
}

// Little-endian whatever the host's order: the wire format fixes it.
void ProtoWriter::raw_fixed(uint64_t bits, int num_bytes) {
  for (int i = 0; i < num_bytes; ++i) out_.push_back(static_cast<char>((bits >> (8 * i)) & 0xFF));
}

void ProtoWriter::tag(int field, int wire_type) {
  raw_varint((static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type));
}

void ProtoWriter::varint(int field, uint64_t value) {
  tag(field, 0);
  raw_varint(value);
}

void ProtoWriter::float64(int field, double value) {
  tag(field, 1);
  raw_fixed(std::bit_cast<uint64_t>(value), 8);
}

void ProtoWriter::float32(int field, float value) {
  tag(field, 5);
  raw_fixed(std::bit_cast<uint32_t>(value), 4);
}

void ProtoWriter::bytes(int field, std::string_view value) {
  tag(field, 2);
  raw_varint(value.size());
  out_.append(value);
}

void ProtoWriter::packed_float64(int field, std::span<const double> values) {
  if (values.empty()) return;
  tag(field, 2);
  raw_varint(values.size() * 8);
  for (double v : values) raw_fixed(std::bit_cast<uint64_t>(v), 8);
}

}  // namespace ember::tensorboard::detail
