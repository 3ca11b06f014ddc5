#include "launcher/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

// Note [Rank cgroups]
// A worker and its children share a process group, which ember-run and the guardian kill
// (Note [Guardian]); a process that calls setsid() or setpgid() leaves it and survives. A
// cgroup cannot be left by an unprivileged process, so where cgroup v2 is writable each
// worker starts in a cgroup of its own, ember-run.<pid>/rank-<r>.<n> below ember-run's
// cgroup: the child moves itself there between fork and exec, before it can start anything.
// Stopping a worker writes 1 to its cgroup.kill (Linux 5.14+; older kernels: SIGKILL to every
// pid in cgroup.procs until it is empty), and the guardian does the same to ember-run.<pid>
// when ember-run dies. No controller is enabled, so the cgroups only group processes: CPU
// and memory accounting stays with ember-run's cgroup, and the "no internal processes" rule
// does not apply.

namespace ember::launcher {
namespace {

// The cgroup2 mount point, from /proc/self/mountinfo ("" if none).
std::string cgroup2_mount() {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    // ... mount-point ... - fstype source options
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream tail(line.substr(dash + 3));
    std::string fstype;
    tail >> fstype;
    if (fstype != "cgroup2") continue;
    std::istringstream head(line.substr(0, dash));
    std::string id, parent, devno, root, mount_point;
    head >> id >> parent >> devno >> root >> mount_point;
    return mount_point;
  }
  return "";
}

// This process's cgroup v2 path ("0::/path" in /proc/self/cgroup), "" if none.
std::string own_cgroup() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  return "";
}

bool write_text(const std::string& path, const char* text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t n = ::write(fd, text, std::strlen(text));
  ::close(fd);
  return n == static_cast<ssize_t>(std::strlen(text));
}

bool populated(const std::string& dir) {
  std::ifstream in(dir + "/cgroup.events");
  std::string key, value;
  while (in >> key >> value)
    if (key == "populated") return value != "0";
  return false;
}

// The cgroups directly below `dir` (its subdirectories), none when it cannot be read.
std::vector<std::string> child_cgroups(const std::string& dir) {
  std::vector<std::string> children;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return children;
  while (dirent* e = ::readdir(d))
    if (e->d_type == DT_DIR && std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
      children.push_back(dir + "/" + e->d_name);
  ::closedir(d);
  return children;
}

void kill_procs(const std::string& dir) {
  std::ifstream in(dir + "/cgroup.procs");
  for (pid_t pid; in >> pid;) ::kill(pid, SIGKILL);
  for (const auto& c : child_cgroups(dir)) kill_procs(c);
}

void remove_tree(const std::string& dir) {
  for (const auto& c : child_cgroups(dir)) remove_tree(c);
  ::rmdir(dir.c_str());
}

}  // namespace

RankCgroups::RankCgroups() {
  const std::string mount = cgroup2_mount();
  if (mount.empty()) {
    why_not_ = "no cgroup v2 hierarchy is mounted";
    return;
  }
  const std::string own = own_cgroup();
  if (own.empty()) {
    why_not_ = "this process is in no cgroup v2 (/proc/self/cgroup has no 0:: line)";
    return;
  }
  const std::string base = mount + (own == "/" ? "" : own);
  const std::string dir = base + "/ember-run." + std::to_string(::getpid());
  if (::mkdir(dir.c_str(), 0755) != 0) {
    why_not_ = "cannot create a cgroup in " + base + " (" + std::strerror(errno) + ")";
    return;
  }
  // Moving a process needs write access to cgroup.procs of the common ancestor: try it with
  // a cgroup of our own before relying on it in the children.
  if (::access((dir + "/cgroup.procs").c_str(), W_OK) != 0 || ::access((base + "/cgroup.procs").c_str(), W_OK) != 0) {
    why_not_ = "may not move processes between cgroups in " + base;
    ::rmdir(dir.c_str());
    return;
  }
  root_ = dir;
}

RankCgroups::~RankCgroups() { kill_and_remove(root_); }

std::string RankCgroups::make(int rank) {
  if (root_.empty()) return "";
  const std::string dir = root_ + "/rank-" + std::to_string(rank) + "." + std::to_string(made_++);
  if (::mkdir(dir.c_str(), 0755) != 0) return "";
  return dir;
}

void RankCgroups::kill_and_remove(const std::string& dir) {
  if (dir.empty()) return;
  const bool have_kill = write_text(dir + "/cgroup.kill", "1");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (populated(dir) && std::chrono::steady_clock::now() < deadline) {
    if (!have_kill) kill_procs(dir);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  remove_tree(dir);
}

bool RankCgroups::join(const char* procs_path) {
  const int fd = ::open(procs_path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, "0", 1) == 1;
  ::close(fd);
  return ok;
}

}  // namespace ember::launcher
