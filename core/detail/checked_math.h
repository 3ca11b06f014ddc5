// Checked arithmetic for sizes, strides and byte counts: the one place where a product or sum
// of tensor dimensions is computed (see Note [Checked shape arithmetic] in checked_math.cpp).
// Every helper throws ValueError naming the op and the shape when the result would not fit in
// int64 (byte counts: when numel * element size would not), so no caller ever wraps around.
// translate_bad_alloc turns a host allocation that cannot exist into OutOfMemoryError.
// Stateless; thread-safe.
#pragma once
#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace ember::detail {

/// Throws ValueError: "<op>: shape <shape> is too large: <what> does not fit in 64 bits".
[[noreturn]] void throw_shape_overflow(const char* op, const std::vector<int64_t>& shape, const char* what);

/// a * b; throws ValueError naming `op` and `shape` on overflow.
inline int64_t checked_mul(int64_t a, int64_t b, const char* op, const std::vector<int64_t>& shape,
                           const char* what = "the number of elements") {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) [[unlikely]]
    throw_shape_overflow(op, shape, what);
  return r;
}

/// a + b; throws ValueError naming `op` and `shape` on overflow.
inline int64_t checked_add(int64_t a, int64_t b, const char* op, const std::vector<int64_t>& shape,
                           const char* what = "the size") {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) [[unlikely]]
    throw_shape_overflow(op, shape, what);
  return r;
}

/// The product of `sizes`. Throws ValueError for a negative size or a product above int64.
/// A shape with a 0 still has each prefix product checked, as PyTorch's stride computation does.
int64_t checked_numel(const std::vector<int64_t>& sizes, const char* op);

/// Row-major contiguous strides (a size of 0 counts as 1); throws ValueError on overflow.
std::vector<int64_t> checked_contiguous_strides(const std::vector<int64_t>& sizes, const char* op);

/// numel(sizes) * element_size as a byte count; throws ValueError when it exceeds int64.
uint64_t checked_nbytes(const std::vector<int64_t>& sizes, uint64_t element_size, const char* op);

/// Throws OutOfMemoryError: "<op>: cannot allocate <num_bytes> bytes of host memory (<why>)".
[[noreturn]] void throw_host_oom(const char* op, uint64_t num_bytes, const char* why);

/// count * element_size, saturating at UINT64_MAX: the byte count of a host buffer of `count`
/// elements, for translate_bad_alloc's size check (never wraps to a small number).
inline uint64_t host_bytes(uint64_t count, uint64_t element_size) {
  uint64_t r;
  return __builtin_mul_overflow(count, element_size, &r) ? ~uint64_t{0} : r;
}

/// The most bytes one host allocation can hold: this machine's RAM plus swap, or the address-space
/// limit (RLIMIT_AS) when that is lower. Read once; thread-safe.
uint64_t host_memory_limit();

/// Runs f() to make a host buffer of `num_bytes` whose size follows a tensor shape. A size above
/// host_memory_limit() is refused first, without trying (an allocation that cannot exist must not
/// be attempted: under ASan operator new aborts the process instead of throwing); a
/// std::bad_alloc or std::length_error from f() becomes OutOfMemoryError too. Both name `op`
/// and `num_bytes`.
template <typename F>
decltype(auto) translate_bad_alloc(const char* op, uint64_t num_bytes, F&& f) {
  if (num_bytes > host_memory_limit()) [[unlikely]]
    throw_host_oom(op, num_bytes, "more than this machine's memory and swap");
  try {
    return std::forward<F>(f)();
  } catch (const std::bad_alloc&) {
    throw_host_oom(op, num_bytes, "std::bad_alloc");
  } catch (const std::length_error&) {
    throw_host_oom(op, num_bytes, "larger than a std::vector can hold");
  }
}

}  // namespace ember::detail
