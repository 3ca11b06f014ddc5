// Safetensors I/O: state dicts saved as, and loaded from, the safetensors format that Python's
// `safetensors` and PyTorch read (https://github.com/huggingface/safetensors). Writes are atomic
// (temporary file in the same directory, fsync, rename); the reader validates every header field
// against the file size before it touches tensor data. All functions are thread-safe as long as
// no two threads write the same path at once (each save uses its own temporary file).
// See Note [Safetensors validation] in core/detail/safetensors_header.cpp for the rules the reader
// enforces.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace ember {

/// One tensor entry of a validated safetensors header. Offsets are in bytes, relative to the
/// start of the byte buffer (which follows the 8-byte length and the JSON header).
struct SafetensorsEntry {
  std::string name;
  DType dtype = kFloat32;
  IntList shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

/// A validated header: entries sorted by data offset (ties, which only 0-byte tensors can have,
/// keep header order), and the "__metadata__" map (empty when absent or null).
struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;
  std::map<std::string, std::string> metadata;
  uint64_t header_num_bytes = 0;  // N, the JSON header's length including padding
  uint64_t buffer_num_bytes = 0;  // bytes after the header; exactly covered by the entries
};

/// Writes `tensors`, in the given order, to `path` in the safetensors format. Non-contiguous and
/// non-CPU tensors are made contiguous on the host first. The header is padded with spaces to a
/// multiple of 8 bytes; "__metadata__" is written only when `metadata` is non-empty. Tensors that
/// share storage (tied weights) are written as independent copies. A symlink at `path` is
/// replaced by the new file, not followed; an existing regular file keeps its permission bits.
/// Atomic: the data goes to an unnamed file in `path`'s directory (O_TMPFILE; where the
/// filesystem lacks it, to `path + ".tmp.<pid>.<random>"`), is fsync'ed, named
/// `path + ".tmp.<pid>.<random>"` and renamed over `path`; on any failure the temporary file is
/// removed, an existing file at `path` is left untouched, and ember::Error naming the path and the
/// OS error is thrown. A writer killed mid-save leaves no file (unnamed), or a temporary that
/// the next save of `path` removes once its pid is dead (see Note [Checkpoint temporaries]). Throws ValueError (before
/// creating any file) for an empty, duplicate, reserved ("__metadata__") or non-UTF-8 name,
/// an undefined tensor, or non-UTF-8 metadata.
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

/// Reads a safetensors file. Tensors are returned in the order of their data offsets in the file
/// (the order save_safetensors wrote them), each a fresh contiguous tensor on `device`.
/// `metadata`, when given, is replaced by the file's "__metadata__" map.
/// Throws ValueError naming the file (and the tensor) for any malformed or inconsistent header
/// or bool data other than 0/1, and ember::Error with the OS error when the file cannot be read.
std::vector<std::pair<std::string, Tensor>> load_safetensors(const std::string& path,
                                                             std::map<std::string, std::string>* metadata = nullptr,
                                                             Device device = Device::cpu());

/// As load_safetensors, keyed by name.
std::map<std::string, Tensor> load_safetensors_map(const std::string& path,
                                                   std::map<std::string, std::string>* metadata = nullptr,
                                                   Device device = Device::cpu());

/// Reads and validates only the header of `path` (no tensor data is read). Errors as load_safetensors.
SafetensorsHeader read_safetensors_header(const std::string& path);

/// Validates the JSON header text `header_json` (N bytes, padding included) against a byte buffer
/// of `buffer_num_bytes`. `source` names the file in error messages. Throws ValueError.
SafetensorsHeader parse_safetensors_header(std::string_view header_json, uint64_t buffer_num_bytes,
                                           const std::string& source);

/// The 100,000,000-byte cap on the JSON header that the reference implementation enforces.
constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

}  // namespace ember
