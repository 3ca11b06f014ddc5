// The CPU's raw memory for the caching allocator (core/allocator.cpp): aligned_alloc, with
// segments of whole 2 MiB pages marked for transparent huge pages (Note [Huge pages for CPU
// segments] in cpu_memory.cpp). Stateless apart from the switch read once; thread-safe.
#pragma once
#include <cstddef>

namespace ember::detail {

// alloc/free/device_capacity of RawMemoryBackend for DeviceType::CPU, the backend every CPU
// allocator starts with. Plain functions, so that allocator.cpp's backend table is constant-
// initialized (no static-initialization order to depend on).
void* cpu_alloc(size_t num_bytes, int device_index);
void cpu_free(void* ptr, int device_index);
size_t cpu_capacity(int device_index);

}  // namespace ember::detail
