#include "core/detail/checked_math.h"

#include <sys/resource.h>
#include <sys/sysinfo.h>

#include <algorithm>
#include <limits>

namespace ember::detail {

// Note [Checked shape arithmetic]
// A tensor's sizes come from users, files (safetensors), other processes (DataLoader batches)
// and arithmetic on other sizes (cat, expand, pad_packed_sequence's total_length). A product
// that wraps around in int64 is undefined behaviour and, worse, yields a small allocation for a
// tensor that claims many elements: zeros({2^62 + 1, 4}) once owned 16 bytes, and a narrow()
// of it wrote over another tensor. So:
//   - every TensorImpl keeps the invariant "sizes are non-negative, numel and numel * element
//     size fit in int64, contiguous strides of its shape are representable": make_tensor and
//     TensorImpl::refresh (which every factory and view goes through) check it with these
//     helpers and throw ValueError naming the op and the shape;
//   - a view is also checked to lie inside its storage (make_view in core/ops/shape.cpp);
//   - code that builds a new shape from others (cat's sum, flatten's product, packed-sequence
//     and collate sizes, the safetensors reader) uses checked_mul / checked_add / checked_numel
//     rather than `*` and `+`;
//   - once a tensor exists, products of its own sizes (kernels' outer * inner) cannot overflow,
//     because they are bounded by its numel;
//   - host buffers whose size follows a tensor shape (std::vector index maps) are allocated
//     inside translate_bad_alloc, so a shape too large to exist is OutOfMemoryError, never
//     std::bad_alloc; a size above the machine's memory and swap is refused before it is tried
//     (ASan's operator new aborts rather than throw, so such an allocation must never be
//     attempted: pad_packed_sequence(total_length = 2^40) once asked for a 32 TiB vector);
//     tensor memory comes from the caching allocator, which throws OutOfMemoryError itself.

namespace {
std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}
}  // namespace

void throw_shape_overflow(const char* op, const std::vector<int64_t>& shape, const char* what) {
  EMBER_THROW(ValueError, op, ": shape ", shape_text(shape), " is too large: ", what,
              " does not fit in 64 bits (at most ", std::numeric_limits<int64_t>::max(), ")");
}

int64_t checked_numel(const std::vector<int64_t>& sizes, const char* op) {
  int64_t n = 1;
  int64_t strided = 1;  // product with zeros counted as 1: the largest contiguous stride
  for (int64_t s : sizes) {
    EMBER_CHECK_T(ValueError, s >= 0, op, ": shape ", shape_text(sizes), " has a negative dimension ", s);
    n = checked_mul(n, s, op, sizes);
    strided = checked_mul(strided, std::max<int64_t>(s, 1), op, sizes, "the contiguous stride");
  }
  return n;
}

std::vector<int64_t> checked_contiguous_strides(const std::vector<int64_t>& sizes, const char* op) {
  std::vector<int64_t> st(sizes.size());
  int64_t s = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    st[static_cast<size_t>(d)] = s;
    s = checked_mul(s, std::max<int64_t>(sizes[static_cast<size_t>(d)], 1), op, sizes, "the contiguous stride");
  }
  return st;
}

uint64_t checked_nbytes(const std::vector<int64_t>& sizes, uint64_t element_size, const char* op) {
  int64_t n = checked_numel(sizes, op);
  return static_cast<uint64_t>(checked_mul(n, static_cast<int64_t>(element_size), op, sizes, "the byte count"));
}

uint64_t host_memory_limit() {
  static const uint64_t limit = [] {
    uint64_t bytes = std::numeric_limits<uint64_t>::max();
    struct sysinfo si {};
    if (sysinfo(&si) == 0) {
      const uint64_t unit = si.mem_unit ? si.mem_unit : 1;
      bytes = host_bytes(static_cast<uint64_t>(si.totalram) + static_cast<uint64_t>(si.totalswap), unit);
    }
    struct rlimit rl {};
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) bytes = std::min<uint64_t>(bytes, rl.rlim_cur);
    return bytes;
  }();
  return limit;
}

void throw_host_oom(const char* op, uint64_t num_bytes, const char* why) {
  EMBER_THROW(OutOfMemoryError, op, ": cannot allocate ", num_bytes, " bytes of host memory (", why, ")");
}

}  // namespace ember::detail
