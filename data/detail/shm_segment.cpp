#include "data/detail/shm_segment.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

// Note [Segment names]
// A segment's name carries the parent's pid and the loader's id, so that whoever tears a
// loader down can remove every segment it may have left behind by scanning /dev/shm for
// that prefix: a segment whose descriptor was still in a socket when the worker was told to
// stop, or one a worker created just before it was killed. The parent unlinks each name as
// soon as it has mapped it, so in normal operation /dev/shm holds only batches in flight.

namespace ember::data::detail {
namespace {

std::string format_mb(size_t num_bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", static_cast<double>(num_bytes) / (1024.0 * 1024.0));
  return buf;
}

}  // namespace

ShmMapping::~ShmMapping() {
  if (data_ != nullptr && num_bytes_ > 0) ::munmap(data_, num_bytes_);
}

// Built with append(): GCC 12 warns falsely (-Wrestrict) on chains of operator+ here.
std::string segment_prefix(pid_t parent_pid, uint64_t loader_id) {
  std::string s(kSegmentPrefix);
  s.append(std::to_string(parent_pid)).append("_").append(std::to_string(loader_id)).append("_");
  return s;
}

std::string segment_name(pid_t parent_pid, uint64_t loader_id, int worker_id, uint64_t seq) {
  std::string s("/");
  s.append(segment_prefix(parent_pid, loader_id)).append(std::to_string(worker_id)).append("_");
  s.append(std::to_string(seq));
  return s;
}

std::unique_ptr<ShmMapping> create_segment(const std::string& name, size_t num_bytes, const std::string& who) {
  EMBER_INTERNAL_ASSERT(num_bytes > 0);
  int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  EMBER_CHECK(fd >= 0, who, ": shm_open(", name, ") failed: ", std::strerror(errno));
  auto fail = [&](const char* what, int err) {
    ::close(fd);
    ::shm_unlink(name.c_str());
    if (err == ENOSPC || err == EFBIG || err == ENOMEM) {
      EMBER_THROW(Error, who, ": /dev/shm has no space for a ", format_mb(num_bytes), " MB batch (", what, ": ",
                  std::strerror(err), "). Free space in /dev/shm or enlarge it (docker: --shm-size), "
                  "or use a smaller batch_size or fewer num_workers / prefetch_factor");
    }
    EMBER_THROW(Error, who, ": could not create a ", format_mb(num_bytes), " MB shared-memory batch (", what,
                ": ", std::strerror(err), ")");
  };
  if (::ftruncate(fd, static_cast<off_t>(num_bytes)) != 0) fail("ftruncate", errno);
  // Reserve the pages now: without this a full tmpfs turns the first write into SIGBUS.
  int err = ::posix_fallocate(fd, 0, static_cast<off_t>(num_bytes));
  if (err != 0) fail("posix_fallocate", err);
  void* p = ::mmap(nullptr, num_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) fail("mmap", errno);
  ::close(fd);
  return std::make_unique<ShmMapping>(p, num_bytes);
}

std::unique_ptr<ShmMapping> open_and_unlink_segment(const std::string& name, size_t num_bytes) {
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  EMBER_CHECK(fd >= 0, "DataLoader: shm_open(", name, ") of a batch failed: ", std::strerror(errno));
  ::shm_unlink(name.c_str());
  void* p = ::mmap(nullptr, num_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  ::close(fd);
  EMBER_CHECK(p != MAP_FAILED, "DataLoader: mmap of batch segment ", name, " (", num_bytes,
              " bytes) failed: ", std::strerror(err));
  return std::make_unique<ShmMapping>(p, num_bytes);
}

void unlink_segment(const std::string& name) noexcept { ::shm_unlink(name.c_str()); }

std::vector<std::string> list_segments_with_prefix(const std::string& prefix) {
  std::vector<std::string> out;
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return out;
  while (dirent* e = ::readdir(dir)) {
    if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) out.emplace_back(e->d_name);
  }
  ::closedir(dir);
  return out;
}

size_t unlink_segments_with_prefix(const std::string& prefix) noexcept {
  size_t n = 0;
  try {
    for (const auto& name : list_segments_with_prefix(prefix)) {
      std::string path("/");
      path.append(name);
      if (::shm_unlink(path.c_str()) == 0) ++n;
    }
  } catch (...) {
  }
  return n;
}

}  // namespace ember::data::detail
