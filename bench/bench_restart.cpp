// ember-bench-restart: how long a job is down after a rank dies. Runs ember-run with 2 ranks
// and --max-restarts 1 over this same binary as the worker (a small training loop: a
// [256 x 256] weight, its gradient all_reduced over tcp each step, rank 0 checkpointing every
// 10 steps), SIGKILLs rank 1 mid-training and prints
//   restart_detect_ms         kill -> ember-run's report of the killed rank
//   restart_rendezvous_ms     report -> the restarted group's first collective done
//   restart_to_first_step_ms  kill -> the restarted group's first training step (checkpoint loaded)
// Times are CLOCK_MONOTONIC (steady_clock), shared by every process on the machine; the
// workers print theirs. Usage: ember-bench-restart [--ember-run PATH] [--repeats N]
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "bench/harness.h"
#include "core/cli.h"
#include "core/serialization.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/tensor.h"
#include "parallel/distributed/init.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch()).count();
}

// ---- worker ---------------------------------------------------------------------------------

int worker(const std::string& dir) {
  using namespace ember;
  const int restart = std::atoi(std::getenv("EMBER_RESTART_COUNT") ? std::getenv("EMBER_RESTART_COUNT") : "0");
  const std::string ckpt = dir + "/ckpt.safetensors";
  Tensor w = zeros({256, 256});
  int64_t step = 0;
  if (restart > 0 && fs::exists(ckpt)) {
    auto m = load_safetensors_map(ckpt);
    w = m.at("w");
    step = static_cast<int64_t>(m.at("step").item());
  }
  parallel::InitOptions o;
  o.timeout_ms = 30'000;
  auto pg = parallel::init_process_group("tcp", o);
  Tensor probe = ones({1});
  pg->all_reduce(probe)->wait();
  if (restart > 0 && pg->rank() == 0) std::printf("FIRST_COLLECTIVE %lld\n", static_cast<long long>(now_us()));
  std::printf("PID %d rank %d\n", static_cast<int>(::getpid()), pg->rank());
  std::fflush(stdout);
  for (;; ++step) {
    Tensor g = full({256, 256}, 0.001);
    pg->all_reduce(g)->wait();
    native::add_(w, g, -1.0);
    if (pg->rank() == 0) {
      if (restart > 0) {
        std::printf("FIRST_STEP %lld\n", static_cast<long long>(now_us()));
        std::fflush(stdout);
        return 0;  // measured: the job may end
      }
      if (step % 10 == 0) save_safetensors(ckpt, {{"w", w}, {"step", full({1}, double(step))}});
      if (step == 40) {
        std::printf("MIDWAY\n");
        std::fflush(stdout);
      }
    }
    if (restart > 0) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// ---- driver ---------------------------------------------------------------------------------

struct Figures {
  double detect_ms = 0, rendezvous_ms = 0, first_step_ms = 0;
};

bool run_once(const std::string& ember_run, const std::string& self, Figures& f) {
  char tmpl[] = "/tmp/ember-bench-restart.XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return false;
  const std::string dir = tmpl;
  int out[2];
  if (::pipe(out) != 0) return false;
  std::vector<std::string> argv = {ember_run, "--nproc-per-node", "2", "--max-restarts", "1", self, "--worker", dir};
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, out[1], 2);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, ember_run.c_str(), &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);
  if (rc != 0) return false;
  FILE* in = ::fdopen(out[0], "r");
  char line[4096];
  int victim = -1;
  int64_t kill_us = 0, report_us = 0, collective_us = 0, step_us = 0;
  std::string log;
  while (std::fgets(line, sizeof line, in) != nullptr) {
    const int64_t t = now_us();
    log += line;
    std::cmatch m;
    if (std::regex_search(line, m, std::regex(R"(PID (\d+) rank 1)")) && victim < 0) victim = std::stoi(m[1].str());
    if (std::strstr(line, "MIDWAY") != nullptr && kill_us == 0 && victim > 0) {
      kill_us = now_us();
      ::kill(victim, SIGKILL);
    }
    if (std::strstr(line, "was killed by signal 9") != nullptr && report_us == 0) report_us = t;
    if (std::regex_search(line, m, std::regex(R"(FIRST_COLLECTIVE (\d+))"))) collective_us = std::stoll(m[1].str());
    if (std::regex_search(line, m, std::regex(R"(FIRST_STEP (\d+))"))) step_us = std::stoll(m[1].str());
  }
  std::fclose(in);
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (kill_us == 0 || report_us == 0 || collective_us == 0 || step_us == 0) {
    std::fprintf(stderr, "ember-bench-restart: the run did not go as planned:\n%s", log.c_str());
    return false;
  }
  f.detect_ms = (report_us - kill_us) / 1000.0;
  f.rendezvous_ms = (collective_us - report_us) / 1000.0;
  f.first_step_ms = (step_us - kill_us) / 1000.0;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string ember_run = EMBER_RUN_PATH, worker_dir;
  int repeats = 3;
  auto app = ember::cli::make_app("ember-bench-restart",
                                  "How long a job is down after a rank dies: ember-run --max-restarts 1 over 2 ranks "
                                  "of this program, rank 1 SIGKILLed mid-training.");
  app->add_option("--ember-run", ember_run, "the launcher to time")->check(ember::cli::not_empty());
  app->add_option("--repeats", repeats, "runs; the median one by kill-to-first-step is printed")
      ->check(ember::cli::at_least(1));
  // This program as ember-run's worker, its checkpoints and timings in the directory given.
  app->add_option("--worker", worker_dir)->group("");
  ember::bench::parse_flags(*app, argc, argv);
  if (!worker_dir.empty()) {
    try {
      return worker(worker_dir);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "worker: %s\n", e.what());
      return 1;
    }
  }
  ember::bench::start("ember-bench-restart");
  const std::string self = fs::canonical("/proc/self/exe").string();
  std::vector<Figures> runs;
  for (int r = 0; r < repeats; ++r) {
    Figures f;
    if (!run_once(ember_run, self, f)) return 1;
    runs.push_back(f);
  }
  // The median run by kill-to-first-step.
  std::sort(runs.begin(), runs.end(), [](auto& a, auto& b) { return a.first_step_ms < b.first_step_ms; });
  const Figures& m = runs[runs.size() / 2];
  std::printf("restart_detect_ms %.1f ms\n", m.detect_ms);
  std::printf("restart_rendezvous_ms %.1f ms\n", m.rendezvous_ms);
  std::printf("restart_to_first_step_ms %.1f ms\n", m.first_step_ms);
  std::printf("restart_to_first_step_goal_ms 2000 ms\n");
  return 0;
}
