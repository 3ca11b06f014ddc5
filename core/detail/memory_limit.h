// EMBER_MEMORY_LIMIT: comma-separated entries DEVICE=SIZE, where DEVICE is a device type
// ("cpu", "cuda": every device of the type) or a device ("cuda:1", parsed by ember::Device)
// and SIZE a number with an optional unit B, KB/KiB/K, MB/MiB/M or GB/GiB/G (powers of 1024).
// Stateless; thread-safe while nothing calls setenv.
#pragma once
#include <cstdint>

#include "core/device.h"

namespace ember::detail {

inline constexpr const char* kMemoryLimitEnv = "EMBER_MEMORY_LIMIT";

/// The limit EMBER_MEMORY_LIMIT sets for `device` in bytes, 0 when none. An entry naming the
/// device wins over one naming its type. Every entry is checked, so a mistake anywhere is a
/// ValueError naming the entry whichever device asks first.
int64_t memory_limit_from_env(Device device);

}  // namespace ember::detail
