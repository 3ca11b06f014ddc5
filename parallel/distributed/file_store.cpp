#include "parallel/distributed/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "core/fd_io.h"

namespace ember::parallel {

namespace {
using Clock = std::chrono::steady_clock;

// Record layout, host byte order (the file never leaves the machine):
//   u8 op ('S' set, 'D' delete) | u32 key_len | u32 value_len | key | value
constexpr size_t kHeaderBytes = 1 + 4 + 4;
constexpr char kOpSet = 'S';
constexpr char kOpDelete = 'D';
// Internal keys carry no leading '/', so they never collide with user keys.
const std::string kRefCountKey = "refcount";
const std::string kFinishedKey = "finished";
constexpr auto kPollInterval = std::chrono::milliseconds(10);

std::string user_key(const std::string& key) { return "/" + key; }
}  // namespace

// An open, flock()ed handle on the store file; unlocks and closes on destruction.
class FileStore::LockedFile {
 public:
  LockedFile(const std::string& path, bool exclusive) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0)
      EMBER_THROW(DistributedError, "FileStore: cannot open '", path, "': ", std::strerror(errno));
    int rc;
    do {
      rc = ::flock(fd_, exclusive ? LOCK_EX : LOCK_SH);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      int err = errno;
      ::close(fd_);
      EMBER_THROW(DistributedError, "FileStore: cannot lock '", path, "': ", std::strerror(err));
    }
    exclusive_ = exclusive;
  }
  ~LockedFile() {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
  LockedFile(const LockedFile&) = delete;
  LockedFile& operator=(const LockedFile&) = delete;
  int fd() const { return fd_; }
  bool exclusive() const { return exclusive_; }

 private:
  int fd_ = -1;
  bool exclusive_ = false;
};

FileStore::FileStore(std::string path, int world_size, int64_t timeout_ms)
    : Store(timeout_ms), path_(std::move(path)), world_size_(world_size) {
  EMBER_CHECK_T(ValueError, !path_.empty(), "FileStore: path must not be empty");
  std::lock_guard<std::mutex> lock(mutex_);
  LockedFile file(path_, /*exclusive=*/true);
  sync_locked(file);
  add_locked(file, kRefCountKey, 1);
}

FileStore::~FileStore() {
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    struct stat st {};
    if (::stat(path_.c_str(), &st) != 0) return;  // already removed by someone else
    LockedFile file(path_, /*exclusive=*/true);
    sync_locked(file);
    const int64_t finished = add_locked(file, kFinishedKey, 1);
    const int64_t refs = add_locked(file, kRefCountKey, -1);
    if (refs == 0 && world_size_ > 0 && finished >= world_size_) ::unlink(path_.c_str());
  } catch (...) {
    // Best effort: a destructor must not throw, and a leftover file is harmless.
  }
}

void FileStore::sync_locked(LockedFile& file) {
  struct stat st {};
  if (::fstat(file.fd(), &st) != 0)
    EMBER_THROW(DistributedError, "FileStore: cannot stat '", path_, "': ", std::strerror(errno));
  if (st.st_dev != dev_ || st.st_ino != ino_ || st.st_size < pos_) {
    // A different (recreated) file, or one that shrank: start over.
    cache_.clear();
    pos_ = 0;
    dev_ = st.st_dev;
    ino_ = st.st_ino;
  }
  if (st.st_size == pos_) return;
  std::vector<uint8_t> buf(static_cast<size_t>(st.st_size - pos_));
  const io::Transfer t = io::pread_full(file.fd(), buf.data(), buf.size(), static_cast<uint64_t>(pos_));
  if (t.error != 0) EMBER_THROW(DistributedError, "FileStore: cannot read '", path_, "': ", std::strerror(t.error));
  const size_t got = t.bytes;  // fewer than asked: the file shrank meanwhile; parse what is there
  size_t off = 0;
  while (got - off >= kHeaderBytes) {
    const char op = static_cast<char>(buf[off]);
    uint32_t klen = 0, vlen = 0;
    std::memcpy(&klen, buf.data() + off + 1, 4);
    std::memcpy(&vlen, buf.data() + off + 5, 4);
    if (op != kOpSet && op != kOpDelete)
      EMBER_THROW(DistributedError, "FileStore: '", path_, "' is corrupt (bad record at offset ",
                  pos_ + static_cast<off_t>(off), ")");
    const size_t total = kHeaderBytes + size_t{klen} + size_t{vlen};
    if (got - off < total) break;  // a record still being written, or left by a crashed writer
    std::string key(reinterpret_cast<const char*>(buf.data() + off + kHeaderBytes), klen);
    if (op == kOpSet) {
      const uint8_t* v = buf.data() + off + kHeaderBytes + klen;
      cache_[key] = std::vector<uint8_t>(v, v + vlen);
    } else {
      cache_.erase(key);
    }
    off += total;
  }
  pos_ += static_cast<off_t>(off);
  // Under the exclusive lock nobody else is writing, so bytes past pos_ are the torn tail
  // of a writer that died mid-append: cut them off before appending after them.
  if (file.exclusive() && pos_ < st.st_size) {
    if (::ftruncate(file.fd(), pos_) != 0)
      EMBER_THROW(DistributedError, "FileStore: cannot truncate '", path_, "': ", std::strerror(errno));
  }
}

void FileStore::append_locked(LockedFile& file, char op, const std::string& raw_key,
                              const std::vector<uint8_t>& value) {
  EMBER_INTERNAL_ASSERT(file.exclusive());
  EMBER_CHECK_T(ValueError, raw_key.size() <= UINT32_MAX && value.size() <= UINT32_MAX,
                "FileStore: key or value too large");
  const uint32_t klen = static_cast<uint32_t>(raw_key.size());
  const uint32_t vlen = static_cast<uint32_t>(value.size());
  std::vector<uint8_t> rec(kHeaderBytes + klen + vlen);
  rec[0] = static_cast<uint8_t>(op);
  std::memcpy(rec.data() + 1, &klen, 4);
  std::memcpy(rec.data() + 5, &vlen, 4);
  std::memcpy(rec.data() + kHeaderBytes, raw_key.data(), klen);
  if (vlen) std::memcpy(rec.data() + kHeaderBytes + klen, value.data(), vlen);
  const io::Transfer t = io::pwrite_full(file.fd(), rec.data(), rec.size(), static_cast<uint64_t>(pos_));
  if (!t.complete(rec.size()))
    EMBER_THROW(DistributedError, "FileStore: cannot write '", path_, "': ", std::strerror(t.error));
  pos_ += static_cast<off_t>(rec.size());
  if (op == kOpSet)
    cache_[raw_key] = value;
  else
    cache_.erase(raw_key);
}

int64_t FileStore::add_locked(LockedFile& file, const std::string& raw_key, int64_t delta) {
  auto it = cache_.find(raw_key);
  const int64_t value = detail::added_counter(raw_key, it != cache_.end() ? &it->second : nullptr, delta);
  append_locked(file, kOpSet, raw_key, detail::format_counter(value));
  return value;
}

bool FileStore::all_present_locked(const std::vector<std::string>& keys) const {
  for (const auto& k : keys)
    if (cache_.find(user_key(k)) == cache_.end()) return false;
  return true;
}

void FileStore::set_impl(const std::string& key, const std::vector<uint8_t>& value) {
  std::lock_guard<std::mutex> lock(mutex_);
  LockedFile file(path_, true);
  sync_locked(file);
  append_locked(file, kOpSet, user_key(key), value);
}

std::vector<uint8_t> FileStore::get_impl(const std::string& key, int64_t timeout_ms) {
  wait_impl({key}, timeout_ms);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = cache_.find(user_key(key));
  if (it == cache_.end()) {  // deleted between the wait and now: read the file again
    LockedFile file(path_, false);
    sync_locked(file);
    it = cache_.find(user_key(key));
    if (it == cache_.end())
      EMBER_THROW(TimeoutError, "FileStore::get: key '", key, "' vanished while waiting for it (",
                  timeout_ms, " ms)");
  }
  return it->second;
}

int64_t FileStore::add_impl(const std::string& key, int64_t delta) {
  std::lock_guard<std::mutex> lock(mutex_);
  LockedFile file(path_, true);
  sync_locked(file);
  return add_locked(file, user_key(key), delta);
}

std::vector<uint8_t> FileStore::compare_set_impl(const std::string& key,
                                                 const std::vector<uint8_t>& expected,
                                                 const std::vector<uint8_t>& desired) {
  std::lock_guard<std::mutex> lock(mutex_);
  LockedFile file(path_, true);
  sync_locked(file);
  const std::string raw = user_key(key);
  auto it = cache_.find(raw);
  const auto outcome = detail::compare_set_rule(it == cache_.end() ? nullptr : &it->second, expected, desired);
  std::vector<uint8_t> result = *outcome.result;
  if (outcome.write) append_locked(file, kOpSet, raw, desired);
  return result;
}

bool FileStore::check_impl(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mutex_);
  LockedFile file(path_, false);
  sync_locked(file);
  return all_present_locked(keys);
}

void FileStore::wait_impl(const std::vector<std::string>& keys, int64_t timeout_ms) {
  const auto deadline = detail::deadline_after(timeout_ms);
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      LockedFile file(path_, false);
      sync_locked(file);
      if (all_present_locked(keys)) return;
      if (Clock::now() >= deadline) {
        std::vector<std::string> missing;
        for (const auto& k : keys)
          if (cache_.find(user_key(k)) == cache_.end()) missing.push_back(k);
        EMBER_THROW(TimeoutError, "FileStore::wait: timed out after ", timeout_ms,
                    " ms waiting for keys ", detail::format_keys(missing), " in '", path_, "'");
      }
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(kPollInterval, deadline - Clock::now()));
  }
}

bool FileStore::delete_key_impl(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  LockedFile file(path_, true);
  sync_locked(file);
  const std::string raw = user_key(key);
  if (cache_.find(raw) == cache_.end()) return false;
  append_locked(file, kOpDelete, raw, {});
  return true;
}

int64_t FileStore::num_keys_impl() {
  std::lock_guard<std::mutex> lock(mutex_);
  LockedFile file(path_, false);
  sync_locked(file);
  int64_t n = 0;
  for (const auto& [k, v] : cache_)
    if (!k.empty() && k[0] == '/') ++n;
  return n;
}

}  // namespace ember::parallel
