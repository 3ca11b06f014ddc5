// POSIX shared-memory segments that carry collated batches from a worker process to the
// DataLoader: the worker creates and fills one per batch, the parent maps it and unlinks the
// name at once, so the memory lives exactly as long as the tensors viewing it.
// Names are "/ember_dl_<parent pid>_<loader id>_<worker id>_<seq>"; see Note [Segment names].
// Thread-safe: every function works on its own file descriptors.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>
#include <sys/types.h>

namespace ember::data::detail {

/// Every segment name starts with this (after the leading '/').
constexpr const char* kSegmentPrefix = "ember_dl_";

/// An mmap'd region; munmaps when destroyed. Move-only.
class ShmMapping {
 public:
  ShmMapping(void* data, size_t num_bytes) : data_(data), num_bytes_(num_bytes) {}
  ShmMapping(const ShmMapping&) = delete;
  ShmMapping& operator=(const ShmMapping&) = delete;
  ~ShmMapping();
  void* data() const { return data_; }
  size_t num_bytes() const { return num_bytes_; }

 private:
  void* data_;
  size_t num_bytes_;
};

/// "ember_dl_<parent_pid>_<loader_id>_" (no leading slash): what every segment of one loader starts with.
std::string segment_prefix(pid_t parent_pid, uint64_t loader_id);
/// The segment name for shm_open ("/" + prefix + "<worker>_<seq>").
std::string segment_name(pid_t parent_pid, uint64_t loader_id, int worker_id, uint64_t seq);

/// Creates `name` with num_bytes (> 0) reserved in /dev/shm and maps it read-write.
/// The space is reserved with posix_fallocate, so writing the mapping cannot SIGBUS; when it
/// cannot be reserved, throws ember::Error "<who>: /dev/shm has no space for a X MB batch ...".
/// On any failure the name is unlinked again.
std::unique_ptr<ShmMapping> create_segment(const std::string& name, size_t num_bytes, const std::string& who);
/// Maps an existing segment read-write and unlinks its name (the mapping keeps the memory).
std::unique_ptr<ShmMapping> open_and_unlink_segment(const std::string& name, size_t num_bytes);
/// Removes a name; ignores a missing one.
void unlink_segment(const std::string& name) noexcept;
/// Unlinks every /dev/shm entry whose name starts with `prefix`; returns how many.
size_t unlink_segments_with_prefix(const std::string& prefix) noexcept;
/// Names (without '/') of /dev/shm entries starting with `prefix` (tests, diagnostics).
std::vector<std::string> list_segments_with_prefix(const std::string& prefix);

}  // namespace ember::data::detail
