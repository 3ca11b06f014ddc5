// CRC-32C (Castagnoli), the checksum of TensorBoard's record framing, and its "masked" form.
// Pure functions over bytes; thread-safe.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ember::tensorboard::detail {

/// CRC-32C of `data` (polynomial 0x1EDC6F41, reflected; init and final xor 0xFFFFFFFF).
uint32_t crc32c(std::string_view data);

/// The masked CRC stored in a record: a rotation by 15 bits plus a constant, so that a CRC of
/// bytes that themselves hold CRCs does not degenerate.
constexpr uint32_t mask_crc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

}  // namespace ember::tensorboard::detail
