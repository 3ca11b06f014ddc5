// ember-bench-ft: what fault tolerance costs and how fast it recovers, on 4 ranks of examples/rnn_dp
// (the FAQ's pack -> LSTM model, --deterministic over 8 shards, CPU, tcp) under ember-run, all in
// the same run. Every rank prints a step-trace line with the wall-clock time of each committed step
// (rnn_dp --trace-steps); faults come from rnn_dp --ft-fault (a rank raises the signal on itself,
// printing the time first) or, for today's path, from this program's SIGKILL.
//   ft_step_ms, plain_step_ms    median time between rank 0's commits, --ft and plain --ddp
//   ft_step_overhead_ratio       their ratio (goal <= 1.03); the two loops differ beyond the
//                                manager (plain --ddp reads through a DataLoader), so also:
//   ft_protocol_ms_per_step      rank 0's median time inside start_quorum + should_commit, and
//   ft_protocol_share            its share of the --ft step
//   ft_kill_to_next_commit_ms    SIGKILL of rank 1 mid-backward -> the survivors' next commit,
//                                minus one ordinary step (goal <= 500)
//   ft_sigstop_to_next_commit_ms SIGSTOP of rank 3 with --ft-timeout 2, the same way (<= 2500)
//   ft_replacement_join_ms       the replacement's start -> its first commit, state transfer
//                                included (goal <= 2000)
//   ft_steps_lost                steps never committed, or committed twice by a rank (goal 0)
//   restart_kill_to_next_commit_ms, restart_steps_lost: the same kill under ember-run
//                                --max-restarts 1 with --resume from a checkpoint every 10 steps
//   torchft_step_ms, torchft_kill_to_next_commit_ms: the same kill against torchft's
//                                fault-tolerant training over Gloo on the same model
//                                (bench_ft_torchft.py under bench::peer_python(), 4 replica groups,
//                                bounded by EMBER_BENCH_PEER_TIMEOUT_S), relayed with its `#` lines
//   ft_vs_torchft_recovery_ratio ft_kill_to_next_commit_ms / torchft's (goal <= 0.5), with
//                                peer_torch_version; where torchft does not import, one `#` line
// Usage: ember-bench-ft [--repeats N]  (EMBER_BENCH_FT_STEPS: steps per run, default 200; --help)
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/harness.h"
#include "core/cli.h"

namespace {

namespace fs = std::filesystem;
namespace bench = ember::bench;

double wall_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::system_clock::now().time_since_epoch()).count();
}

struct Commit {
  int64_t step = 0;
  int slot = 0;
  int ranks = 0;
  double t_ms = 0;
};

std::vector<Commit> commits(const std::string& output) {
  std::vector<Commit> out;
  static const std::regex line(R"(step-trace step=(\d+) slot=(\d+) ranks=(\d+) hash=[0-9a-f]+ t_ms=([0-9.]+))");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line); it != std::sregex_iterator(); ++it)
    out.push_back({std::stoll((*it)[1]), std::stoi((*it)[2]), std::stoi((*it)[3]), std::stod((*it)[4])});
  return out;
}

// Median time between consecutive commits of `slot`, over steps [from, to).
double step_ms(const std::vector<Commit>& cs, int slot, int64_t from, int64_t to) {
  std::map<int64_t, double> t;
  for (const auto& c : cs)
    if (c.slot == slot && c.step >= from && c.step < to) t[c.step] = c.t_ms;
  std::vector<double> d;
  for (auto it = t.begin(); std::next(it) != t.end(); ++it)
    if (std::next(it)->first == it->first + 1) d.push_back(std::next(it)->second - it->second);
  return bench::median(d);
}

// Rank 0's median time inside start_quorum + should_commit (ft_ms of its step-trace lines) from
// step `from` on.
double protocol_ms_per_step(const std::string& output, int64_t from) {
  static const std::regex line(R"(step-trace step=(\d+) slot=0 ranks=\d+ hash=[0-9a-f]+ t_ms=[0-9.]+ ft_ms=([0-9.]+))");
  std::vector<double> v;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line); it != std::sregex_iterator(); ++it)
    if (std::stoll((*it)[1]) >= from) v.push_back(std::stod((*it)[2]));
  return bench::median(v);
}

// Steps in [0, n) never committed, plus commits a rank made of a step it had already passed.
int64_t steps_lost(const std::vector<Commit>& cs, int64_t n) {
  std::set<int64_t> seen;
  std::map<int, int64_t> last;
  int64_t lost = 0;
  for (const auto& c : cs) {
    seen.insert(c.step);
    auto it = last.find(c.slot);
    if (it != last.end() && c.step <= it->second) ++lost;
    last[c.slot] = c.step;
  }
  for (int64_t s = 0; s < n; ++s)
    if (!seen.count(s)) ++lost;
  return lost;
}

std::optional<double> first_match(const std::string& text, const std::string& pattern, size_t from = 0) {
  std::smatch m;
  const std::string rest = text.substr(std::min(from, text.size()));
  if (!std::regex_search(rest, m, std::regex(pattern))) return std::nullopt;
  return std::stod(m[1]);
}

struct Setup {
  std::string ember_run = EMBER_RUN_PATH;
  std::string rnn_dp = RNN_DP_PATH;
  fs::path dir;
  int64_t steps = 200;
  std::vector<std::string> args(const std::string& name) const {
    return {"--ddp", "--trace-steps", "--deterministic", "--shards", "8", "--limit", "200", "--batch-size", "96",
            "--dropout", "0.3", "--workers", "0", "--threads", "1", "--progress", "none", "--epochs", "1000",
            "--max-steps", std::to_string(steps), "--checkpoint-dir", (dir / name).string(), "--metrics",
            (dir / name / "metrics.jsonl").string()};
  }
  bench::BoundedRun run(const std::vector<std::string>& launcher, std::vector<std::string> rnn_args) const {
    std::vector<std::string> argv{ember_run};
    argv.insert(argv.end(), launcher.begin(), launcher.end());
    argv.push_back("--nproc-per-node");
    argv.push_back("4");
    argv.push_back(rnn_dp);
    argv.insert(argv.end(), rnn_args.begin(), rnn_args.end());
    return bench::run_bounded(argv, 300);
  }
  bench::BoundedRun ft(const std::string& name, const std::string& fault, const std::string& timeout_s) const {
    std::vector<std::string> a = args(name);
    a.push_back("--ft");
    if (!fault.empty()) {
      a.push_back("--ft-fault");
      a.push_back(fault);
    }
    return run({"--ft", "--ft-timeout", timeout_s, "--max-restarts", "2"}, a);
  }
};

void say_failed(const std::string& what, const bench::BoundedRun& r) {
  std::printf("# %s failed%s: %s\n", what.c_str(), r.timed_out ? " (timed out)" : "", bench::one_line(r.output).c_str());
}

// Today's path: ember-run --max-restarts 1, checkpoints every 10 steps, --resume; this program
// SIGKILLs rank 1 once it committed step `at` - 1 (as soon as this program reads that line). Returns (kill -> next commit ms, steps redone).
std::optional<std::pair<double, int64_t>> restart_kill(const Setup& s, int64_t at, double ordinary_ms) {
  static int runs = 0;
  const std::string name = "restart" + std::to_string(runs++);
  const fs::path log = s.dir / (name + ".log");
  std::vector<std::string> a = s.args(name);
  for (const char* x : {"--checkpoint-every", "10", "--resume"}) a.push_back(x);
  std::vector<std::string> argv{s.ember_run, "--max-restarts", "1", "--nproc-per-node", "4", s.rnn_dp};
  argv.insert(argv.end(), a.begin(), a.end());
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::vector<char*> args;
    for (auto& x : argv) args.push_back(x.data());
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  auto read = [&] {
    std::ifstream in(log);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  double kill_ms = 0;
  std::string text;
  while (std::chrono::steady_clock::now() < deadline) {
    text = read();
    const auto pid1 = first_match(text, R"(rank 1 of 4 \(local rank 1, pid (\d+)\))");
    if (kill_ms == 0 && pid1 && text.find("step-trace step=" + std::to_string(at - 1) + " slot=1 ") != std::string::npos) {
      kill_ms = wall_ms();
      ::kill(static_cast<pid_t>(*pid1), SIGKILL);
    }
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ::kill(-pid, SIGKILL);
  ::waitpid(pid, nullptr, WNOHANG);
  text = read();
  if (kill_ms == 0) {
    std::printf("# restart run never reached step %lld: %s\n", static_cast<long long>(at), bench::one_line(text).c_str());
    return std::nullopt;
  }
  // The restarted group's commits are the ones printed after ember-run says it restarts.
  const size_t restarted = text.find("restarting the worker group");
  if (restarted == std::string::npos) {
    std::printf("# restart run: ember-run did not restart: %s\n", bench::one_line(text).c_str());
    return std::nullopt;
  }
  std::optional<Commit> next;
  int64_t last_before = -1;
  for (const auto& c : commits(text.substr(0, restarted))) last_before = std::max(last_before, c.step);
  for (const auto& c : commits(text.substr(restarted)))
    if (!next || c.t_ms < next->t_ms) next = c;
  if (!next) {
    std::printf("# restart run: no commit after the kill: %s\n", bench::one_line(text).c_str());
    return std::nullopt;
  }
  return std::make_pair(next->t_ms - kill_ms - ordinary_ms, last_before + 1 - next->step);
}

// torchft's side of the kill (bench_ft_torchft.py, see its docstring): relays its figures and `#`
// lines and returns its torchft_kill_to_next_commit_ms, or nullopt (with `#` lines saying why)
// where the peer python has no torchft, or the peer failed or hung.
std::optional<double> torchft_kill() {
  const std::string python = bench::peer_python();
  std::string why;
  const std::string torch = bench::torch_version(python, why);
  if (torch.empty()) {
    bench::print_peer_version("", "torchft peer", why);
    return std::nullopt;
  }
  const auto probe = bench::run_bounded(
      {python, "-c", "from importlib.metadata import version; import torchft; print('torchft_version', version('torchft'))"},
      bench::peer_timeout_s(120));
  if (!probe.ok() || probe.output.find("torchft_version ") == std::string::npos) {
    bench::print_peer_version("", "torchft peer",
                              "torchft is not importable by " + python + " (" + bench::one_line(probe.output, 200) +
                                  "); scripts/setup_peers.sh installs it beside today's torch " + torch);
    return std::nullopt;
  }
  bench::print_peer_version(torch, "torchft peer", "");
  const int timeout_s = bench::peer_timeout_s();
  // The script bounds its replica groups itself a little earlier, so that it still reports.
  const auto run = bench::run_bounded({python, EMBER_BENCH_FT_TORCHFT_SCRIPT, "--ranks", "4", "--steps", "40", "--kill-at",
                                       "20", "--timeout-s", "10", "--bound-s", std::to_string(std::max(30, timeout_s - 30))},
                                      timeout_s);
  std::optional<double> kill_ms;
  bool said_why = false;
  for (const std::string& line : bench::output_lines(run.output)) {
    double v = 0;
    if (line.rfind("torchft_", 0) == 0 || line.rfind("# ", 0) == 0) std::printf("%s\n", line.c_str());
    if (std::sscanf(line.c_str(), "torchft_kill_to_next_commit_ms %lf", &v) == 1) kill_ms = v;
    said_why = said_why || line.rfind("# torchft peer:", 0) == 0;
  }
  if (run.timed_out) {
    std::printf("# torchft peer timed out after %d s (EMBER_BENCH_PEER_TIMEOUT_S); its process group was killed\n",
                timeout_s);
  } else if (!run.ok() && !said_why) {
    std::printf("# torchft peer failed: %s\n", bench::one_line(run.output, 300).c_str());
  }
  std::fflush(stdout);
  return run.ok() ? kill_ms : std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = bench::env_int("EMBER_BENCH_FT_REPEATS", 3);
  auto app = ember::cli::make_app("ember-bench-ft",
                                  "What ember-run --ft costs per step and how fast it recovers, on 4 ranks of rnn_dp, "
                                  "against today's restart path and torchft in the same run. EMBER_BENCH_FT_STEPS: "
                                  "steps per run (default 200).");
  app->add_option("--repeats", repeats, "runs of each kind (default: EMBER_BENCH_FT_REPEATS, else 3)")
      ->check(ember::cli::at_least(1));
  bench::parse_flags(*app, argc, argv);
  bench::start("ember-bench-ft");
  Setup s;
  s.steps = bench::env_int("EMBER_BENCH_FT_STEPS", 200);
  char tmpl[] = "/tmp/ember_bench_ft.XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  s.dir = tmpl;
  std::printf("# 4 ranks of rnn_dp (--deterministic, 8 shards, global batch 96, 1 thread each), %lld steps a run, "
              "%d repeats\n",
              static_cast<long long>(s.steps), repeats);

  // The per-step cost: --ft and plain --ddp take turns; rank 0's median commit interval over the
  // run's second half (warm).
  std::vector<double> ft_ms, plain_ms, protocol_ms;
  for (int i = 0; i < repeats; ++i) {
    const auto f = s.ft("calm" + std::to_string(i), "", "10");
    if (!f.ok()) say_failed("the undisturbed --ft run", f);
    ft_ms.push_back(step_ms(commits(f.output), 0, s.steps / 2, s.steps));
    protocol_ms.push_back(protocol_ms_per_step(f.output, s.steps / 2));
    const auto p = s.run({}, s.args("plain" + std::to_string(i)));
    if (!p.ok()) say_failed("the plain --ddp run", p);
    plain_ms.push_back(step_ms(commits(p.output), 0, s.steps / 2, s.steps));
  }
  const double ft_step = bench::median(ft_ms), plain_step = bench::median(plain_ms);
  const double protocol = bench::median(protocol_ms);
  std::printf("ft_step_ms %.3f ms\nplain_step_ms %.3f ms\n", ft_step, plain_step);
  if (plain_step > 0) std::printf("ft_step_overhead_ratio %.3f ratio\n", ft_step / plain_step);
  std::printf("ft_protocol_ms_per_step %.3f ms\n", protocol);
  if (ft_step > protocol) std::printf("ft_protocol_share %.3f ratio\n", protocol / ft_step);

  // A rank killed mid-backward at step 20 (and replaced), a rank stopped at step 20.
  std::vector<double> kill_ms, join_ms, stop_ms;
  int64_t lost = 0;
  for (int i = 0; i < repeats; ++i) {
    const auto k = s.ft("kill" + std::to_string(i), "1:0:20:backward:KILL", "10");
    if (!k.ok()) say_failed("the kill run", k);
    const auto cs = commits(k.output);
    lost += steps_lost(cs, s.steps);
    const auto killed = first_match(k.output, R"(ft-fault: slot 1 raising SIGKILL at step 20 \(backward\) at ([0-9.]+) ms)");
    for (const auto& c : cs) {
      if (killed && c.slot == 0 && c.step == 20) kill_ms.push_back(c.t_ms - *killed - ft_step);
    }
    const auto started = first_match(k.output, R"(incarnation 1, pid \d+, started at ([0-9.]+) ms)");
    for (const auto& c : cs) {
      if (started && c.slot == 1 && c.t_ms > *started) {
        join_ms.push_back(c.t_ms - *started);
        break;
      }
    }
    const auto st = s.ft("stop" + std::to_string(i), "3:0:20:backward:STOP", "2");
    if (!st.ok()) say_failed("the SIGSTOP run", st);
    const auto scs = commits(st.output);
    lost += steps_lost(scs, s.steps);
    const auto stopped = first_match(st.output, R"(ft-fault: slot 3 raising SIGSTOP at step 20 \(backward\) at ([0-9.]+) ms)");
    for (const auto& c : scs)
      if (stopped && c.slot == 0 && c.step == 20) stop_ms.push_back(c.t_ms - *stopped - ft_step);
  }
  std::printf("ft_kill_to_next_commit_ms %.1f ms\n", bench::median(kill_ms));
  std::printf("ft_sigstop_to_next_commit_ms %.1f ms\n", bench::median(stop_ms));
  if (join_ms.empty()) {
    std::printf("# ft_replacement_join_ms: no replacement committed a step before the runs ended\n");
  } else {
    std::printf("ft_replacement_join_ms %.1f ms\n", bench::median(join_ms));
  }
  std::printf("ft_steps_lost %lld steps\n", static_cast<long long>(lost));

  // Today's path, the same kill.
  std::vector<double> restart_ms;
  int64_t restart_lost = 0;
  const double plain = plain_step > 0 ? plain_step : ft_step;
  for (int i = 0; i < repeats; ++i) {
    if (auto r = restart_kill(s, 22, plain)) {
      restart_ms.push_back(r->first);
      restart_lost = std::max(restart_lost, r->second);
    }
  }
  std::printf("restart_kill_to_next_commit_ms %.1f ms\n", bench::median(restart_ms));
  std::printf("restart_steps_lost %lld steps\n", static_cast<long long>(restart_lost));
  if (!kill_ms.empty() && !restart_ms.empty())
    std::printf("ft_vs_restart_recovery_ratio %.3f ratio\n", bench::median(kill_ms) / bench::median(restart_ms));
  std::fflush(stdout);

  // torchft, the same kill, after ember's runs (never alongside them).
  if (const auto torchft = torchft_kill(); torchft && *torchft > 0 && !kill_ms.empty())
    std::printf("ft_vs_torchft_recovery_ratio %.3f ratio\n", bench::median(kill_ms) / *torchft);
  std::error_code ec;
  fs::remove_all(s.dir, ec);
  return 0;
}
