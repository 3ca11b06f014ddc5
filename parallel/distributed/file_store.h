// FileStore: a Store kept in one file that every participant opens by path (processes on
// one host, or on a shared filesystem with working flock). The file is an append-only log
// of set/delete records; each operation takes flock() on it, reads the records it has not
// seen yet into a local cache, then appends. get/wait poll the file (there is nothing to
// sleep on across processes). Thread-safe: a mutex serializes the threads of one process.
// Like PyTorch's FileStore, the last of world_size instances to be destroyed removes the
// file (none removes it when world_size <= 0).
#pragma once
#include <sys/types.h>

#include <map>
#include <mutex>

#include "parallel/distributed/store.h"

namespace ember::parallel {

class FileStore : public Store {
 public:
  /// Opens (creating if needed) the store at path. world_size: how many instances will
  /// use it in total, for cleanup; <= 0 means unknown (the file is kept).
  /// Throws DistributedError when the file cannot be opened or locked.
  explicit FileStore(std::string path, int world_size = -1, int64_t timeout_ms = kDefaultTimeoutMs);
  ~FileStore() override;

  const std::string& path() const { return path_; }

 protected:
  EMBER_STORE_HOOKS_OVERRIDE;

 private:
  class LockedFile;
  // All below run with mutex_ held and the file locked.
  void sync_locked(LockedFile& file);
  void append_locked(LockedFile& file, char op, const std::string& raw_key,
                     const std::vector<uint8_t>& value);
  int64_t add_locked(LockedFile& file, const std::string& raw_key, int64_t delta);
  bool all_present_locked(const std::vector<std::string>& keys) const;

  const std::string path_;
  const int world_size_;
  std::mutex mutex_;
  // The file's contents as of pos_, keyed by raw key ("/" + user key, or an internal
  // key without the slash). Guarded by mutex_, as are pos_ and the file identity.
  std::map<std::string, std::vector<uint8_t>> cache_;
  off_t pos_ = 0;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

}  // namespace ember::parallel
