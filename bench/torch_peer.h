// TorchPeer: a PyTorch process that a benchmark drives over pipes, one command per line and one
// reply line per command, so ember's and PyTorch's timed steps can alternate on a loaded host
// (bench_lstm_torch.py, bench_loss_torch.py). The child starts as `python script args...` and
// first prints `ready <torch version>`; ok() is false when it did not. Not thread-safe.
#pragma once
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace ember::bench {

class TorchPeer {
 public:
  TorchPeer(const std::string& python, const std::string& script, const std::vector<std::string>& args) {
    int to_child[2], from_child[2];
    if (pipe(to_child) != 0 || pipe(from_child) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(to_child[0], 0);
      dup2(from_child[1], 1);
      close(to_child[1]);
      close(from_child[0]);
      // Idle OpenMP workers sleep instead of spinning, so on a loaded host PyTorch's 2-thread
      // steps are not dominated by spinning against descheduled threads (this only helps torch).
      setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/0);
      std::vector<char*> argv{const_cast<char*>(python.c_str()), const_cast<char*>(script.c_str())};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(python.c_str(), argv.data());
      _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    to_ = fdopen(to_child[1], "w");
    from_ = fdopen(from_child[0], "r");
    std::string hello = read_line();
    ok_ = hello.rfind("ready", 0) == 0;
    if (ok_) version_ = hello.substr(6);
  }
  ~TorchPeer() {
    if (to_ != nullptr) {
      if (ok_) command("quit");
      fclose(to_);
    }
    if (from_ != nullptr) fclose(from_);
    if (pid_ > 0) waitpid(pid_, nullptr, 0);
  }
  bool ok() const { return ok_; }
  const std::string& version() const { return version_; }
  std::string command(const std::string& cmd) {
    std::fprintf(to_, "%s\n", cmd.c_str());
    std::fflush(to_);
    return read_line();
  }

 private:
  std::string read_line() {
    char buf[512];
    if (from_ == nullptr || std::fgets(buf, sizeof buf, from_) == nullptr) {
      ok_ = false;
      return "";
    }
    std::string s(buf);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
  }
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
  bool ok_ = false;
  std::string version_;
};


}  // namespace ember::bench
