// Helpers for the data tests: child processes of this process (from /proc) and this
// process's DataLoader shared-memory segments (from /dev/shm).
#pragma once
#include <chrono>
#include <cstdio>
#include <dirent.h>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "data/detail/shm_segment.h"

namespace ember::data::testing {

/// Pids of processes whose parent is this process (zombies included).
inline std::vector<pid_t> child_pids() {
  std::vector<pid_t> out;
  const pid_t self = ::getpid();
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    std::string path = "/proc/" + std::string(e->d_name) + "/stat";
    FILE* f = std::fopen(path.c_str(), "r");
    if (!f) continue;
    char buf[512];
    size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
    std::fclose(f);
    buf[n] = '\0';
    // "pid (comm) state ppid ...": comm may hold spaces, so parse after the last ')'.
    std::string s(buf);
    auto rp = s.rfind(')');
    if (rp == std::string::npos) continue;
    char state = 0;
    long ppid = 0;
    if (std::sscanf(s.c_str() + rp + 1, " %c %ld", &state, &ppid) == 2 && ppid == self) {
      out.push_back(static_cast<pid_t>(pid));
    }
  }
  ::closedir(d);
  return out;
}

/// Segments in /dev/shm made for loaders of this process.
inline std::vector<std::string> own_segments() {
  return detail::list_segments_with_prefix(std::string(detail::kSegmentPrefix) + std::to_string(::getpid()) + "_");
}

/// Waits (up to 2 s) for the condition; true when it held.
template <typename F>
bool eventually(F f) {
  for (int i = 0; i < 200; ++i) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return f();
}

}  // namespace ember::data::testing
