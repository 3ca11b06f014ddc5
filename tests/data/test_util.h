// Helpers for the data tests: child processes of this process (from /proc), this process's
// mappings of DataLoader batch buffers (from /proc/self/maps), and ember's entries in /dev/shm.
#pragma once
#include <chrono>
#include <cstdio>
#include <cstring>
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

/// How many batch buffers this process has mapped (one per live batch: its tensors share it).
inline size_t batch_mappings() {
  FILE* f = std::fopen("/proc/self/maps", "r");
  if (!f) return 0;
  size_t n = 0;
  char line[4096];
  const std::string needle = std::string("/memfd:") + detail::kBufferName;
  while (std::fgets(line, sizeof line, f)) {
    if (std::strstr(line, needle.c_str())) ++n;
  }
  std::fclose(f);
  return n;
}

/// Names in /dev/shm that contain "ember" and `pid` between underscores: what a DataLoader in
/// process `pid` would have left there, had its batches had names ("ember_dl_<pid>_..." until
/// issue 19). Filtered by pid because other processes on the machine may use /dev/shm; pid 0:
/// every "ember" name.
inline std::vector<std::string> ember_devshm_entries_of(pid_t pid) {
  std::vector<std::string> out;
  const std::string tag = "_" + std::to_string(pid) + "_";
  DIR* d = ::opendir("/dev/shm");
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.find("ember") != std::string::npos && (pid == 0 || name.find(tag) != std::string::npos)) out.push_back(name);
  }
  ::closedir(d);
  return out;
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
