#include "core/detail/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <random>
#include <string_view>

#include "core/error.h"
#include "core/fd_io.h"

namespace ember::detail {
namespace {

// Note [Checkpoint temporaries]
// A save writes the whole file somewhere no reader looks, then renames it over `path`, so a
// reader sees the old file or the new one, never a part. Where the filesystem allows it
// (Linux's O_TMPFILE: ext4, xfs, btrfs, tmpfs, ...), that somewhere is an unnamed file in the
// target's directory: a writer killed mid-save leaves nothing, as the kernel frees an unnamed
// file with its last descriptor. Once the data is fsync'ed, the file gets a name
// (`path.tmp.<pid>.<16 hex>`, via linkat of /proc/self/fd/N) only for the rename that follows.
// Elsewhere the data goes to that named file from the start. Either way, a kill between
// naming and rename leaves a `.tmp.` file behind, so every save first removes the temporaries
// of `path` whose writer pid is no longer alive on this host (never its own process's, which
// another thread may be writing). A writer on another host sharing the directory is not seen.

std::string parent_dir(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string temp_name(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  uint64_t r = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ (counter.fetch_add(1) * 0x9E3779B97F4A7C15ull);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(r));
  return path + ".tmp." + std::to_string(::getpid()) + "." + hex;
}

/// The pid in `name` when it is `<base>.tmp.<pid>.<16 hex>`, else -1.
pid_t temp_owner(const std::string& name, const std::string& base) {
  const std::string prefix = base + ".tmp.";
  if (name.size() <= prefix.size() + 17 || name.compare(0, prefix.size(), prefix) != 0) return -1;
  const std::string_view rest(name.data() + prefix.size(), name.size() - prefix.size());
  const size_t dot = rest.find('.');
  if (dot == std::string_view::npos || rest.size() - dot - 1 != 16) return -1;
  for (char c : rest.substr(dot + 1))
    if (!std::isxdigit(static_cast<unsigned char>(c))) return -1;
  pid_t pid = -1;
  auto [end, ec] = std::from_chars(rest.data(), rest.data() + dot, pid);
  return ec == std::errc() && end == rest.data() + dot && pid > 0 ? pid : -1;
}

/// Removes `path`'s temporaries left by writers that are no longer alive (best effort).
void remove_stale_temps(const std::string& path) {
  const std::string dir = parent_dir(path);
  const size_t slash = path.find_last_of('/');
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  const pid_t self = ::getpid();
  while (const dirent* e = ::readdir(d)) {
    const pid_t owner = temp_owner(e->d_name, base);
    if (owner <= 0 || owner == self) continue;
    if (::kill(owner, 0) != 0 && errno == ESRCH) (void)::unlinkat(::dirfd(d), e->d_name, 0);
  }
  ::closedir(d);
}

std::string os_error(int err) { return std::strerror(err); }

}  // namespace

AtomicFile::AtomicFile(std::string path, std::string who) : path_(std::move(path)), who_(std::move(who)) {
  remove_stale_temps(path_);
#ifdef O_TMPFILE
  const std::string dir = parent_dir(path_);
  int ufd = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
  if (ufd >= 0) {
    fd_ = ufd;
    unnamed_ = true;
    label_ = "an unnamed temporary file in '" + dir + "'";
  }
  // EOPNOTSUPP, EISDIR or EINVAL: no O_TMPFILE here; a named file below. Other errors recur there.
#endif
  int last_errno = 0;
  for (int attempt = 0; fd_ < 0 && attempt < 16; ++attempt) {
    std::string name = temp_name(path_);
    int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      label_ = "'" + name + "'";
      tmp_path_ = std::move(name);
      fd_ = fd;
      break;
    }
    last_errno = errno;
    if (errno != EEXIST && errno != EINTR) break;
  }
  if (fd_ < 0)
    EMBER_THROW(Error, who_, ": cannot create a temporary file next to '", path_, "': ", os_error(last_errno));
  struct stat old;
  if (::stat(path_.c_str(), &old) == 0 && S_ISREG(old.st_mode))
    (void)::fchmod(fd_, old.st_mode & 0777);  // keep the permissions of the file we replace
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !tmp_path_.empty()) ::unlink(tmp_path_.c_str());
}

void AtomicFile::write(const void* buf, size_t num_bytes) {
  const io::Transfer t = io::write_full(fd_, buf, num_bytes);
  if (!t.complete(num_bytes))
    EMBER_THROW(Error, who_, ": cannot write '", path_, "' (temporary file ", label_, "): ", os_error(t.error));
}

// Gives an unnamed temporary its name, just before the rename.
void AtomicFile::name_temp() {
  const std::string proc = "/proc/self/fd/" + std::to_string(fd_);
  int last_errno = 0;
  for (int attempt = 0; attempt < 16; ++attempt) {
    std::string name = temp_name(path_);
    if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW) == 0) {
      tmp_path_ = std::move(name);
      label_ = "'" + tmp_path_ + "'";
      return;
    }
    last_errno = errno;
    if (errno != EEXIST && errno != EINTR) break;
  }
  EMBER_THROW(Error, who_, ": cannot link ", label_, " into place for '", path_, "': ", os_error(last_errno));
}

void AtomicFile::commit() {
  if (::fsync(fd_) != 0)
    EMBER_THROW(Error, who_, ": cannot fsync ", label_, " for '", path_, "': ", os_error(errno));
  if (unnamed_) name_temp();  // See Note [Checkpoint temporaries].
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0)
    EMBER_THROW(Error, who_, ": cannot close '", tmp_path_, "' for '", path_, "': ", os_error(errno));
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0)
    EMBER_THROW(Error, who_, ": cannot rename '", tmp_path_, "' to '", path_, "': ", os_error(errno));
  committed_ = true;
  // Make the rename itself durable. Best effort: the new file is already in place.
  const int dir = ::open(parent_dir(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    (void)::fsync(dir);
    ::close(dir);
  }
}

}  // namespace ember::detail
