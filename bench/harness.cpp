#include "bench/harness.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <thread>

#include <sys/stat.h>

#include "core/cli.h"
#include "core/env.h"
#include "core/error.h"

#ifndef EMBER_BENCH_PEERS_VENV
#define EMBER_BENCH_PEERS_VENV ".venv-peers"
#endif
#ifndef EMBER_BENCH_SOURCE_DIR
#define EMBER_BENCH_SOURCE_DIR "bench"
#endif
#ifndef EMBER_BENCH_BINARY_DIR
#define EMBER_BENCH_BINARY_DIR "."
#endif
#ifndef EMBER_BENCH_CXX
#define EMBER_BENCH_CXX "g++"
#endif

namespace ember::bench {

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<double> sample_ms(int warmup, int reps, const std::function<void()>& f) {
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> ms;
  ms.reserve(static_cast<size_t>(std::max(reps, 0)));
  for (int i = 0; i < reps; ++i) ms.push_back(time_ms(f));
  return ms;
}

void parse_flags(CLI::App& app, int argc, const char* const* argv) {
  bool run = false;
  try {
    run = cli::parse(app, argc, argv);
  } catch (const ValueError& e) {
    std::fprintf(stderr, "%s: %s\n\n%s", app.get_name().c_str(), e.message().c_str(), app.help().c_str());
    std::exit(2);
  }
  if (!run) {
    std::fputs(app.help().c_str(), stdout);
    std::exit(0);
  }
}

void parse_no_flags(const char* program, const std::string& description, int argc, const char* const* argv) {
  parse_flags(*cli::make_app(program, description), argc, argv);
}

CLI::Validator refused_if_throws(std::function<void(const std::string&)> parse, const std::string& description) {
  return CLI::Validator(
      [parse = std::move(parse)](std::string& v) -> std::string {
        try {
          parse(v);
        } catch (const std::exception& e) {
          return e.what();
        }
        return {};
      },
      description);
}

std::string load_average() {
  FILE* f = std::fopen("/proc/loadavg", "r");
  if (f == nullptr) return "unknown";
  double a = 0, b = 0, c = 0;
  const int n = std::fscanf(f, "%lf %lf %lf", &a, &b, &c);
  std::fclose(f);
  if (n != 3) return "unknown";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f %.2f %.2f", a, b, c);
  return buf;
}

double load_average_1min() {
  const std::string s = load_average();
  return s == "unknown" ? -1.0 : std::atof(s.c_str());
}

namespace {
pid_t started_pid = -1;
// Forked ranks and workers inherit the handler; only the process that called start() prints.
void print_exit_load() {
  if (::getpid() != started_pid) return;
  std::printf("# load average at exit: %s\n", load_average().c_str());
  std::fflush(stdout);
}
}  // namespace

void start_without_flags(const char* program, const std::string& description, int argc, const char* const* argv) {
  parse_no_flags(program, description, argc, argv);
  start(program);
}

void start(const char* program) {
  ::signal(SIGPIPE, SIG_IGN);
  std::printf("# %s: load average %s, %u hardware threads\n", program, load_average().c_str(),
              std::thread::hardware_concurrency());
  std::fflush(stdout);
  started_pid = ::getpid();
  static bool registered = false;
  if (!registered) {
    registered = true;
    std::atexit(print_exit_load);
  }
}

namespace {

// `name` as an integer through ember's one environment reader (core/env.h); a value that is not
// a decimal int in [0, INT_MAX] is refused (exit 2, naming the variable), never read as 0.
// nullopt: not set.
std::optional<int64_t> env_integer(const char* name) {
  try {
    return ember::env::integer(name, 0, std::numeric_limits<int>::max());
  } catch (const ember::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::exit(2);
  }
}

}  // namespace

int env_int(const char* name, int fallback) {
  const std::optional<int64_t> v = env_integer(name);
  return v && *v > 0 ? static_cast<int>(*v) : fallback;
}

int env_int_at_least(const char* name, int fallback, int at_least) {
  const std::optional<int64_t> v = env_integer(name);
  return v ? static_cast<int>(std::max<int64_t>(at_least, *v)) : fallback;
}

std::string peers_venv() {
  const char* v = std::getenv("EMBER_PEERS_VENV");
  return v != nullptr && *v != '\0' ? v : EMBER_BENCH_PEERS_VENV;
}

namespace {
bool debian_peers() {
  const char* p = std::getenv("EMBER_BENCH_PEER");
  return p != nullptr && std::string(p) == "debian";
}
}  // namespace

std::string peer_python() {
  const char* py = std::getenv("EMBER_BENCH_PYTHON");
  if (py != nullptr && *py != '\0') return py;
  if (debian_peers()) return "/usr/bin/python3";
  const std::string venv_python = peers_venv() + "/bin/python";
  if (::access(venv_python.c_str(), X_OK) == 0) return venv_python;
  return "/usr/bin/python3";
}

int peer_timeout_s(int fallback) { return env_int("EMBER_BENCH_PEER_TIMEOUT_S", fallback); }

bool BoundedRun::ok() const { return !timed_out && status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0; }

namespace {

// Child side of a peer launch: own process group, dies with the parent, stdout (and stderr when
// asked) onto `out_fd`, stdin from `in_fd` (or /dev/null), then exec.
[[noreturn]] void exec_child(const std::vector<std::string>& argv, const std::vector<std::string>& env, pid_t parent,
                             int in_fd, int out_fd, bool stderr_too) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);
  if (in_fd < 0) in_fd = ::open("/dev/null", O_RDONLY);
  ::dup2(in_fd, 0);
  ::dup2(out_fd, 1);
  if (stderr_too) ::dup2(out_fd, 2);
  for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
  // Idle OpenMP workers sleep instead of spinning, so on a loaded host a peer's 2-thread steps are
  // not dominated by spinning against descheduled threads (this only helps the peer).
  ::setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execv(args[0], args.data());
  std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
  ::_exit(127);
}

void kill_group(pid_t pid) {
  if (pid > 0) ::kill(-pid, SIGKILL);
}

}  // namespace

BoundedRun run_bounded(const std::vector<std::string>& argv, int timeout_s, const std::vector<std::string>& env) {
  BoundedRun run;
  if (argv.empty()) {
    run.output = "run_bounded: no command";
    return run;
  }
  int out[2];
  if (::pipe(out) != 0) {
    run.output = std::string("pipe(): ") + std::strerror(errno);
    return run;
  }
  std::fflush(stdout);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(out[0]);
    exec_child(argv, env, parent, -1, out[1], /*stderr_too=*/true);
  }
  ::close(out[1]);
  if (pid < 0) {
    ::close(out[0]);
    run.output = std::string("fork(): ") + std::strerror(errno);
    return run;
  }
  ::setpgid(pid, pid);  // as the child does: whichever runs first
  const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      run.timed_out = true;
      break;
    }
    pollfd p{out[0], POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (r < 0 && errno != EINTR) break;
    if (r <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // every writer closed: the command is done
    run.output.append(buf, static_cast<size_t>(n));
  }
  ::close(out[0]);
  if (run.timed_out) {
    kill_group(pid);
    ::waitpid(pid, &run.status, 0);
    run.status = -1;
    return run;
  }
  // The pipe closed; the command exits now, or is stuck after closing it: bounded all the same.
  while (::waitpid(pid, &run.status, WNOHANG) == 0) {
    if (Clock::now() >= deadline) {
      run.timed_out = true;
      kill_group(pid);
      ::waitpid(pid, &run.status, 0);
      run.status = -1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill_group(pid);  // nothing it started outlives it
  return run;
}

std::string one_line(const std::string& s, size_t max_chars) {
  std::string t = s;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
  if (t.size() > max_chars) t = "..." + t.substr(t.size() - max_chars);
  for (char& c : t) c = (c == '\n' || c == '\r') ? '|' : c;
  return t;
}

std::vector<std::string> output_lines(const std::string& output) {
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos < output.size()) {
    size_t end = output.find('\n', pos);
    if (end == std::string::npos) end = output.size();
    lines.push_back(output.substr(pos, end - pos));
    pos = end + 1;
  }
  return lines;
}

bool parse_torch_line(const std::string& line, std::string& version) {
  char ver[128];
  if (line.rfind("torch ", 0) != 0 || std::sscanf(line.c_str() + 6, "%127s", ver) != 1) return false;
  version = ver;
  return true;
}

namespace {

int64_t mtime_ns(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

// Compiles bench/<name>_libtorch.cpp against the LibTorch at `prefix` (Note [LibTorch peer]).
std::string compile_libtorch_peer(const std::string& name, const std::string& prefix, std::string& why) {
  const std::string source = std::string(EMBER_BENCH_SOURCE_DIR) + "/" + name + "_libtorch.cpp";
  const std::string binary = std::string(EMBER_BENCH_BINARY_DIR) + "/" + name + "_libtorch";
  const std::string api_include = prefix + "/include/torch/csrc/api/include";
  if (mtime_ns(api_include + "/torch/torch.h") < 0) {
    why = "LibTorch's headers are not installed (no " + api_include +
          "/torch/torch.h; EMBER_SETUP_TORCH=1 scripts/setup.sh installs Debian's libtorch-dev, "
          "scripts/setup_peers.sh today's)";
    return "";
  }
  const int64_t built = mtime_ns(binary);
  if (built >= 0 && built >= mtime_ns(source)) return binary;
  const std::string log = binary + ".log", tmp = binary + ".tmp";
  const bool system = prefix == "/usr";
  const std::string libs = system ? "" : " -L'" + prefix + "/lib' -Wl,-rpath,'" + prefix + "/lib'";
  const std::string includes = system ? "" : " -I'" + prefix + "/include'";
  // Debian's 1.13 headers are C++17 code; LibTorch 2.10 and later require C++20.
  const std::string std_flag = system ? " -std=c++17" : " -std=c++20";
  const std::string cmd = std::string(EMBER_BENCH_CXX) + " -O2" + std_flag + " -D_GLIBCXX_USE_CXX11_ABI=1" +
                          includes + " -I'" + api_include + "' '" + source + "' -o '" + tmp + "'" + libs +
                          " -ltorch -ltorch_cpu -lc10 -ldl >'" + log + "' 2>&1 && mv '" + tmp + "' '" + binary + "'";
  std::printf("# compiling the LibTorch peer (once; see Note [LibTorch peer]): %s\n", cmd.c_str());
  std::fflush(stdout);
  const auto t0 = Clock::now();
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    why = "compiling " + source + " against " + prefix + " failed (status " + std::to_string(rc) + "; see " + log + ")";
    return "";
  }
  std::printf("# LibTorch peer compiled in %.0f s\n", ms_between(t0, Clock::now()) / 1000.0);
  return binary;
}

}  // namespace

std::string libtorch_peer(const std::string& name, std::string& why) {
  const char* prefix = std::getenv("EMBER_BENCH_LIBTORCH_PREFIX");
  if (prefix != nullptr && *prefix != '\0') return compile_libtorch_peer(name, prefix, why);
  if (debian_peers()) return compile_libtorch_peer(name, "/usr", why);
  const std::string built = std::string(EMBER_BENCH_BINARY_DIR) + "/libtorch_peers/" + name + "_libtorch";
  if (::access(built.c_str(), X_OK) == 0) return built;
  return compile_libtorch_peer(name, "/usr", why);
}

std::string torch_version(const std::string& python, std::string& why) {
  if (::access(python.c_str(), X_OK) != 0) {
    why = python + " is not an executable (scripts/setup_peers.sh makes the peer environment)";
    return "";
  }
  const int timeout_s = peer_timeout_s(120);
  const BoundedRun run = run_bounded({python, "-c", "import torch; print('torch_version', torch.__version__)"}, timeout_s);
  if (run.timed_out) {
    why = python + " did not import torch within " + std::to_string(timeout_s) + " s; killed";
    return "";
  }
  const size_t at = run.output.find("torch_version ");
  if (!run.ok() || at == std::string::npos) {
    why = "PyTorch is not importable by " + python + " (" + one_line(run.output, 200) +
          "); scripts/setup_peers.sh installs today's";
    return "";
  }
  std::string v = run.output.substr(at + 14);
  v = v.substr(0, v.find_first_of(" \r\n"));
  return v;
}

void print_peer_version(const std::string& version, const std::string& what, const std::string& why) {
  if (version.empty()) {
    std::printf("peer_torch_version none version\n# %s skipped: %s\n", what.c_str(), one_line(why).c_str());
  } else {
    std::printf("peer_torch_version %s version\n", version.c_str());
  }
  std::fflush(stdout);
}

TorchPeer::TorchPeer(const std::string& program, const std::vector<std::string>& args, int timeout_s)
    : program_(program), timeout_s_(timeout_s) {
  if (::access(program.c_str(), X_OK) != 0) {
    why_ = program + " is not an executable";
    return;
  }
  int to_child[2], from_child[2];
  if (::pipe(to_child) != 0) {
    why_ = std::string("pipe(): ") + std::strerror(errno);
    return;
  }
  if (::pipe(from_child) != 0) {
    why_ = std::string("pipe(): ") + std::strerror(errno);
    ::close(to_child[0]);
    ::close(to_child[1]);
    return;
  }
  std::vector<std::string> argv{program};
  argv.insert(argv.end(), args.begin(), args.end());
  std::fflush(stdout);
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ == 0) {
    ::close(to_child[1]);
    ::close(from_child[0]);
    exec_child(argv, {}, parent, to_child[0], from_child[1], /*stderr_too=*/false);
  }
  ::close(to_child[0]);
  ::close(from_child[1]);
  if (pid_ < 0) {
    why_ = std::string("fork(): ") + std::strerror(errno);
    ::close(to_child[1]);
    ::close(from_child[0]);
    return;
  }
  ::setpgid(pid_, pid_);
  to_ = to_child[1];
  from_ = from_child[0];
  ok_ = true;
  const std::string hello = read_line();
  if (ok_ && hello.rfind("ready", 0) == 0) {
    version_ = hello.size() > 6 ? hello.substr(6) : "unknown";
  } else if (ok_) {
    kill_peer(program + " did not say ready (it said '" + one_line(hello, 200) + "')");
  }
}

TorchPeer::~TorchPeer() {
  if (ok_) {
    // Its goodbye is read (briefly bounded), so it never writes into a closed pipe.
    timeout_s_ = std::min(timeout_s_, 10);
    command("quit");
  }
  if (to_ >= 0) ::close(to_);
  if (from_ >= 0) ::close(from_);
  if (pid_ > 0) {
    // A peer told to quit has a few seconds to do so; one that does not is killed.
    const auto deadline = Clock::now() + std::chrono::seconds(ok_ ? 10 : 0);
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (Clock::now() >= deadline) {
        kill_group(pid_);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill_group(pid_);
  }
}

std::string TorchPeer::command(const std::string& cmd) {
  if (!ok_) return "";
  const std::string line = cmd + "\n";
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(to_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      kill_peer(program_ + " stopped reading its commands");
      return "";
    }
    done += static_cast<size_t>(n);
  }
  return read_line();
}

std::string TorchPeer::read_line() {
  const auto deadline = Clock::now() + std::chrono::seconds(timeout_s_);
  for (;;) {
    const size_t nl = pending_.find('\n');
    if (nl != std::string::npos) {
      std::string s = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      if (!s.empty() && s.back() == '\r') s.pop_back();
      return s;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      kill_peer(program_ + " gave no reply within " + std::to_string(timeout_s_) +
                " s (EMBER_BENCH_PEER_TIMEOUT_S); its process group was killed");
      return "";
    }
    pollfd p{from_, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (r < 0 && errno != EINTR) {
      kill_peer(std::string("poll(): ") + std::strerror(errno));
      return "";
    }
    if (r <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(from_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      kill_peer(program_ + " exited (" + (pending_.empty() ? std::string("no output") : one_line(pending_, 200)) + ")");
      return "";
    }
    pending_.append(buf, static_cast<size_t>(n));
  }
}

void TorchPeer::kill_peer(const std::string& why) {
  const bool was_ok = ok_;
  ok_ = false;
  why_ = why;
  kill_group(pid_);
  if (was_ok) {
    std::printf("# peer stopped: %s\n", one_line(why).c_str());
    std::fflush(stdout);
  }
}

}  // namespace ember::bench
