#include "data/detail/shm_segment.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

// Note [Nameless batches]
// A batch buffer is a memfd (or, where memfd_create is refused, an O_TMPFILE file in
// /dev/shm): shared memory that never has a name in any directory. It exists only through
// descriptors and mappings, so the kernel frees it when the last holder is gone, whoever
// dies and however (SIGKILL included): the worker that made it, the parent that maps it, or
// both with descriptors still queued in the socket between them. This is what PyTorch's
// "file_descriptor" sharing strategy achieves with shm_open + unlink, minus the moment
// between the two. Named segments (shm_open) would outlive a killed parent: nobody would
// be left to unlink them. The price: /dev/shm's size limit (docker --shm-size) does not
// apply; the memory is charged to the process's memory cgroup like any other.

namespace ember::data::detail {
namespace {

std::string format_mb(size_t num_bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", static_cast<double>(num_bytes) / (1024.0 * 1024.0));
  return buf;
}

int create_nameless(int* err) {
  int fd = ::memfd_create(kBufferName, MFD_CLOEXEC);
  if (fd >= 0) return fd;
  if (errno != ENOSYS && errno != EPERM) {
    *err = errno;
    return -1;
  }
  // memfd_create missing or forbidden (old kernel, seccomp): an unnamed tmpfs file.
  fd = ::open("/dev/shm", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) *err = errno;
  return fd;
}

}  // namespace

ShmMapping::~ShmMapping() {
  if (data_ != nullptr && num_bytes_ > 0) ::munmap(data_, num_bytes_);
}

SharedBuffer create_shared_buffer(size_t num_bytes, const std::string& who) {
  EMBER_INTERNAL_ASSERT(num_bytes > 0);
  int create_err = 0;
  SharedBuffer b;
  b.fd.reset(create_nameless(&create_err));
  EMBER_CHECK(b.fd.valid(), who, ": cannot create a shared-memory batch buffer: ", std::strerror(create_err));
  auto fail = [&](const char* what, int err) {
    if (err == ENOSPC || err == EFBIG || err == ENOMEM) {
      EMBER_THROW(Error, who, ": no shared memory left for a ", format_mb(num_bytes), " MB batch (", what, ": ",
                  std::strerror(err), "). Free memory, or use a smaller batch_size or fewer num_workers / "
                  "prefetch_factor");
    }
    EMBER_THROW(Error, who, ": could not create a ", format_mb(num_bytes), " MB shared-memory batch (", what,
                ": ", std::strerror(err), ")");
  };
  if (::ftruncate(b.fd.get(), static_cast<off_t>(num_bytes)) != 0) fail("ftruncate", errno);
  // Reserve the pages now: without this, memory running out turns the first write into SIGBUS.
  int err = ::posix_fallocate(b.fd.get(), 0, static_cast<off_t>(num_bytes));
  if (err != 0) fail("posix_fallocate", err);
  void* p = ::mmap(nullptr, num_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, b.fd.get(), 0);
  if (p == MAP_FAILED) fail("mmap", errno);
  b.mapping = std::make_unique<ShmMapping>(p, num_bytes);
  return b;
}

std::unique_ptr<ShmMapping> map_shared_buffer(int fd, size_t num_bytes, const std::string& who) {
  struct stat st {};
  EMBER_CHECK(::fstat(fd, &st) == 0, "DataLoader: fstat of a batch buffer failed: ", std::strerror(errno));
  EMBER_CHECK_T(ValueError, st.st_size >= 0 && static_cast<uint64_t>(st.st_size) >= num_bytes, who, " sent a ", st.st_size, "-byte batch buffer for a ", num_bytes, "-byte batch");
  void* p = ::mmap(nullptr, num_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  EMBER_CHECK(p != MAP_FAILED, "DataLoader: mmap of a ", num_bytes, "-byte batch buffer failed: ",
              std::strerror(errno));
  return std::make_unique<ShmMapping>(p, num_bytes);
}

}  // namespace ember::data::detail
