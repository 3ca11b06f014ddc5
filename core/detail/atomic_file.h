// AtomicFile: writes a file that replaces `path` whole or not at all: the data goes to a
// temporary next to it, is fsync'ed and renamed over `path` (Note [Checkpoint temporaries] in
// atomic_file.cpp). Errors are ember::Error naming the caller (`who`), the path and the OS
// error; on any failure the temporary is removed and `path` is untouched. One object per save;
// not thread-safe, while saves of different paths may run concurrently.
#pragma once
#include <cstddef>
#include <string>

namespace ember::detail {

class AtomicFile {
 public:
  /// Creates the temporary next to `path` (first removing the temporaries of `path` left by
  /// writers no longer alive); it takes the permission bits of a regular file at `path`.
  AtomicFile(std::string path, std::string who);
  /// Removes the temporary unless commit() succeeded.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* buf, size_t num_bytes);
  /// fsync, name the temporary when it has no name yet, close, rename it over `path`, and fsync
  /// the directory (best effort: the new file is in place by then).
  void commit();

 private:
  void name_temp();

  std::string path_;
  std::string who_;
  std::string tmp_path_;  // its name: from the start (named), or once linked (unnamed)
  std::string label_;     // how messages name it
  int fd_ = -1;
  bool unnamed_ = false;
  bool committed_ = false;
};

}  // namespace ember::detail
