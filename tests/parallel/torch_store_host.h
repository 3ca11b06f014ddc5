// PyTorch TCPStore servers for tests, hosted by a Python process with torch
// (/usr/bin/python3 with Debian's python3-torch, or EMBER_TORCH_PYTHON): new_store() asks it
// for a fresh server on a free loopback port; python_get() reads a key through a Python
// client, as PyTorch's own code would. skip_reason() is non-empty where torch is absent.
// One host per test process (shared()); the Python process ends when the test process does
// (its stdin closes). Not thread-safe: call from the test's main thread.
#pragma once
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace ember::parallel::test {

class TorchStoreHost {
 public:
  static TorchStoreHost& shared() {
    static TorchStoreHost host;
    return host;
  }

  const std::string& skip_reason() const { return skip_reason_; }

  /// The port of a new PyTorch TCPStore server (is_master=True, wait_for_workers=False).
  uint16_t new_store() { return static_cast<uint16_t>(std::stoi(ask("new"))); }

  /// A Python TCPStore client's get(key) on the server at port (decoded as UTF-8).
  std::string python_get(uint16_t port, const std::string& key) { return ask("get " + std::to_string(port) + " " + key); }

  /// The torch version the host runs.
  const std::string& version() const { return version_; }

 private:
  TorchStoreHost() {
    const char* py = std::getenv("EMBER_TORCH_PYTHON");
    const std::string python = py != nullptr ? py : "/usr/bin/python3";
    if (::access(python.c_str(), X_OK) != 0) {
      skip_reason_ = python + " is not there (set EMBER_TORCH_PYTHON to a Python with torch)";
      return;
    }
    int to_child[2], from_child[2];
    if (::pipe(to_child) != 0 || ::pipe(from_child) != 0) {
      skip_reason_ = "pipe() failed";
      return;
    }
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(to_child[0], 0);
      ::dup2(from_child[1], 1);
      ::close(to_child[0]);
      ::close(to_child[1]);
      ::close(from_child[0]);
      ::close(from_child[1]);
      ::execl(python.c_str(), python.c_str(), "-c", kScript, static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(to_child[0]);
    ::close(from_child[1]);
    to_ = ::fdopen(to_child[1], "w");
    from_ = ::fdopen(from_child[0], "r");
    const std::string hello = read_line();
    if (hello.rfind("READY ", 0) != 0) {
      skip_reason_ = python + " cannot host a PyTorch TCPStore (no torch.distributed?): " + hello;
      return;
    }
    version_ = hello.substr(6);
  }
  ~TorchStoreHost() {
    if (to_ != nullptr) std::fclose(to_);
    if (from_ != nullptr) std::fclose(from_);
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
  }

  std::string ask(const std::string& line) {
    if (!skip_reason_.empty()) std::abort();  // the caller should have skipped
    std::fprintf(to_, "%s\n", line.c_str());
    std::fflush(to_);
    return read_line();
  }

  std::string read_line() {
    std::string s;
    int c;
    while ((c = std::fgetc(from_)) != EOF && c != '\n') s += static_cast<char>(c);
    if (c == EOF && s.empty()) s = "(the Python process exited)";
    return s;
  }

  // Reads commands from stdin: "new" -> a new server's port; "get PORT KEY" -> the value.
  static constexpr const char* kScript = R"(
import sys, datetime
try:
    import torch, torch.distributed as dist
    dist.TCPStore
except Exception as e:
    print('ERROR', repr(e), flush=True)
    sys.exit(0)
print('READY', torch.__version__, flush=True)
servers = []
for line in sys.stdin:
    words = line.split()
    if words[0] == 'new':
        s = dist.TCPStore('127.0.0.1', 0, None, True, datetime.timedelta(seconds=600), wait_for_workers=False)
        servers.append(s)
        print(s.port, flush=True)
    elif words[0] == 'get':
        c = dist.TCPStore('127.0.0.1', int(words[1]), None, False, datetime.timedelta(seconds=10))
        print(c.get(words[2]).decode(), flush=True)
)";

  std::string skip_reason_;
  std::string version_;
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
};

}  // namespace ember::parallel::test
