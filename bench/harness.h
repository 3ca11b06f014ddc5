// The shared benchmark harness: timing and medians, the load average, and the PyTorch / LibTorch
// peers (which interpreter, launching one with a bound, its version line). Every ember-bench-*
// program uses it, so that every figure is measured, summarized and labelled the same way.
//
// Output conventions (bench/README.md): `name value unit` lines; `#` lines are commentary.
// bench::start() prints the load average when the program starts and again when it exits.
// A benchmark with a PyTorch peer prints `peer_torch_version V version` (V is `none` when no peer
// could be had, with a one-line `#` reason), so every ratio says what it was measured against.
//
// The peer interpreter (peer_python()): $EMBER_BENCH_PYTHON if set; else /usr/bin/python3 with
// EMBER_BENCH_PEER=debian (the 1.13 peers, for comparison); else the project's peer
// environment (scripts/setup_peers.sh: <source>/.venv-peers, or $EMBER_PEERS_VENV) when its
// python exists; else Debian's /usr/bin/python3 (torch 1.13 from python3-torch).
// Command lines are CLI11's (core/cli.h's make_app, then parse_flags()): the usage is generated
// from the flags, and an unknown or malformed flag is refused with exit code 2.
// A peer is bounded: past peer_timeout_s() seconds (EMBER_BENCH_PEER_TIMEOUT_S, default 300) its
// whole process group is killed, one `#` line says so, and the benchmark goes on without it.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace CLI {
class App;
class Validator;
}

namespace ember::bench {

using Clock = std::chrono::steady_clock;

// The middle value (the mean of the two middle ones for an even count); 0 for no values, which
// callers treat as "no figure" (every timed figure is positive).
double median(std::vector<double> v);

inline double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Milliseconds one call of f takes.
template <typename F>
double time_ms(F&& f) {
  const auto t0 = Clock::now();
  f();
  return ms_between(t0, Clock::now());
}

// Milliseconds of each of `reps` calls of f after `warmup` untimed ones.
std::vector<double> sample_ms(int warmup, int reps, const std::function<void()>& f);

// The median of sample_ms(warmup, reps, f).
inline double median_ms(int warmup, int reps, const std::function<void()>& f) {
  return median(sample_ms(warmup, reps, f));
}

// Wall-clock and CPU (this process, every thread) milliseconds of one timed step.
struct StepTime {
  double wall_ms = 0, cpu_ms = 0;
};

// The timed steps of one configuration, in order: their wall and CPU milliseconds.
struct StepTimes {
  std::vector<double> wall, cpu;
  void add(const StepTime& s) {
    wall.push_back(s.wall_ms);
    cpu.push_back(s.cpu_ms);
  }
};

// Parses argv[1..] into `app`'s options (an App from ember::cli::make_app). --help / -h prints
// the usage to stdout and exits 0; an unknown flag, a stray argument, or a missing, malformed or
// refused value prints `<program>: <what CLI11 says, naming the flag>` and the usage to stderr
// and exits 2. Call it before bench::start(), so a refused command line runs nothing.
void parse_flags(CLI::App& app, int argc, const char* const* argv);
// For a benchmark that takes no flags (its knobs are environment variables): an App of
// `program` with `description` (which names them), parsed with parse_flags.
void parse_no_flags(const char* program, const std::string& description, int argc, const char* const* argv);
// A flag's check that runs `parse` on the value and refuses it with the message of whatever
// `parse` throws (e.g. Device's for "cuda:x"); `description` goes into the usage.
CLI::Validator refused_if_throws(std::function<void(const std::string&)> parse, const std::string& description);

// /proc/loadavg's three figures ("1.61 0.57 0.21"), or "unknown".
std::string load_average();
// Its first figure, or -1.
double load_average_1min();

// Prints `# <program>: load average <a b c>` now and again at exit (`# load average at exit`).
// Ignores SIGPIPE from then on: a benchmark writes to its peers' pipes, and a peer that dies
// must become an error the benchmark reports (EPIPE), not the end of the benchmark.
void start(const char* program);
// parse_no_flags, then start: the opening of a benchmark that takes no flags.
void start_without_flags(const char* program, const std::string& description, int argc, const char* const* argv);

// Positive integer from the environment variable `name` (core/env.h's reader), else `fallback`
// (unset, or <= 0). A value that is not an integer exits 2 with a message naming the variable.
int env_int(const char* name, int fallback);
// A repetition count from the environment variable `name`: `fallback` when unset, else its
// value raised to at least `at_least`; not an integer: exit 2, naming the variable.
int env_int_at_least(const char* name, int fallback, int at_least);

// The peer environment's directory (may not exist): $EMBER_PEERS_VENV, else <source>/.venv-peers.
std::string peers_venv();
// The Python that runs the PyTorch peers (see the top of this file; EMBER_BENCH_PEER=debian picks
// /usr/bin/python3 where EMBER_BENCH_PYTHON is not set).
std::string peer_python();
// EMBER_BENCH_PEER_TIMEOUT_S, else `fallback` seconds.
int peer_timeout_s(int fallback = 300);

// Output of a command run with a deadline.
struct BoundedRun {
  std::string output;      // stdout and stderr together
  bool timed_out = false;  // the deadline passed: its whole process group was killed
  int status = -1;         // waitpid's status when it exited by itself
  bool ok() const;         // exited by itself with status 0
};

// Runs argv[0] (a path) with `argv` in a process group of its own and collects its output. Past
// `timeout_s` seconds the whole group (the command and every process it started) is killed with
// SIGKILL and reaped; it also dies with this process (PR_SET_PDEATHSIG). `env` entries
// ("NAME=value") are added to the child's environment.
BoundedRun run_bounded(const std::vector<std::string>& argv, int timeout_s,
                       const std::vector<std::string>& env = {});

// The last `max_chars` characters of `s` on one line (newlines shown as '|'): for `#` lines.
std::string one_line(const std::string& s, size_t max_chars = 400);

// The lines of a peer's output, without their '\n' (a last line without one counts too).
std::vector<std::string> output_lines(const std::string& output);
// A peer script's `torch <version>` line: sets `version` (its first word, at most 127 characters)
// and returns true; false, leaving `version` alone, for any other line.
bool parse_torch_line(const std::string& line, std::string& version);

// Note [LibTorch peer]
// A C++ peer (bench/<name>_libtorch.cpp, e.g. wordlm, autograd) against one of two LibTorches:
//  - today's, from the peer environment's torch wheel: bench/libtorch_peers builds it with the
//    wheel's own CMake package when the environment exists at configure time (the default);
//  - another prefix, $EMBER_BENCH_LIBTORCH_PREFIX (Debian's libtorch-dev is /usr; with
//    EMBER_BENCH_PEER=debian): compiled on first use with the build's C++ compiler into
//    <build>/bench/<name>_libtorch (again whenever the source is newer; remove it after changing
//    the prefix), headers from P/include, libraries P/lib, -ltorch -ltorch_cpu -lc10. Compiling
//    against torch's headers takes about 20 s of CPU, so that side is never part of a normal
//    build. Without the wheel's peer and without a prefix, /usr is tried.
// Returns the peer's path, or "" with `why` set.
std::string libtorch_peer(const std::string& name, std::string& why);

// torch.__version__ as `python` imports it (bounded), or "" with `why` set.
std::string torch_version(const std::string& python, std::string& why);

// Prints `peer_torch_version <version> version`, or `peer_torch_version none version` and a
// `# <what> skipped: <why>` line when `version` is empty.
void print_peer_version(const std::string& version, const std::string& what, const std::string& why);

// A peer process that a benchmark drives over pipes, one command per line and one reply line per
// command, so ember's and the peer's timed steps can alternate on a loaded host. The child starts
// as `program args...` (program is a path) in a process group of its own and first prints
// `ready <torch version>`; ok() is false when it did not. Every reply is awaited at most
// `timeout_s` seconds: past that the peer's process group is killed, a `#` line says so, and ok()
// turns false (later commands return ""). Not thread-safe.
class TorchPeer {
 public:
  TorchPeer(const std::string& program, const std::vector<std::string>& args, int timeout_s = peer_timeout_s());
  // The historical form: `python script args...`.
  TorchPeer(const std::string& python, const std::string& script, const std::vector<std::string>& args)
      : TorchPeer(python, with_front(script, args)) {}
  ~TorchPeer();
  TorchPeer(const TorchPeer&) = delete;
  TorchPeer& operator=(const TorchPeer&) = delete;

  bool ok() const { return ok_; }
  const std::string& version() const { return version_; }
  // Why the peer is not (or no longer) ok, one line.
  const std::string& why() const { return why_; }
  std::string command(const std::string& cmd);

 private:
  static std::vector<std::string> with_front(const std::string& first, std::vector<std::string> rest) {
    rest.insert(rest.begin(), first);
    return rest;
  }
  std::string read_line();
  void kill_peer(const std::string& why);

  std::string program_;
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  std::string pending_;  // read but not yet returned
  int timeout_s_;
  bool ok_ = false;
  std::string version_, why_;
};

}  // namespace ember::bench
