// The worker program ember_run_test.cpp starts under ember-run. argv[1] picks a behaviour:
//   env                          print the launcher's environment (stdout, stderr, partial line)
//   store                        rendezvous through the TCPStore ember-run hosts
//   fail RANK exit:N|sigkill DIR every rank writes DIR/pid_<rank>; RANK fails once all are up,
//                                the others sleep until stopped
//   fail-first RANK CODE         RANK exits CODE on the first attempt only; a restarted
//                                group checks that the store starts empty, then rendezvous
//   trap DIR                     record SIGTERM/SIGINT in DIR/signal_<rank>, then exit 0
//   ignore-term RANK DIR         ignore SIGTERM; RANK exits 1 once all are up
//   grandchild RANK DIR          fork a sleeping child (DIR/child_<rank>); RANK exits 2
//                                (RANK -1: nobody fails)
//   daemon DIR                   fork a sleeping child (DIR/child_<rank>), then exit 0
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "core/cpu_affinity.h"
#include "parallel/distributed/tcp_store.h"

namespace {

using ember::parallel::TCPStore;
using ember::parallel::TCPStoreOptions;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}
int rank() { return std::atoi(env("RANK").c_str()); }
int world_size() { return std::atoi(env("WORLD_SIZE").c_str()); }

void write_file(const std::string& path, const std::string& text) {
  { std::ofstream(path + ".tmp") << text; }
  std::rename((path + ".tmp").c_str(), path.c_str());  // readers never see half a file
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

void wait_for_all(const std::string& dir, const std::string& stem) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (int r = 0; r < world_size(); ++r)
    while (!exists(dir + "/" + stem + std::to_string(r)) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

[[noreturn]] void sleep_until_stopped() {
  for (int i = 0; i < 1200; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::exit(99);  // nobody stopped us: the test will notice this exit code
}

std::unique_ptr<TCPStore> connect_store() {
  TCPStoreOptions o;
  o.timeout_ms = 20'000;  // the token comes from EMBER_STORE_TOKEN
  return std::make_unique<TCPStore>(env("MASTER_ADDR"), std::atoi(env("MASTER_PORT").c_str()), o);
}

void barrier(TCPStore& store, const std::string& name) {
  if (store.add(name + "/arrived", 1) == world_size()) store.set(name + "/go", std::string("1"));
  store.wait({name + "/go"});
}

char g_signal_path[4096];
void record_signal(int signo) {
  int fd = ::open(g_signal_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    char c[4] = {char('0' + signo / 10), char('0' + signo % 10), '\n', 0};
    ssize_t ignored = ::write(fd, c, 3);
    (void)ignored;
    ::close(fd);
  }
  ::_exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 64;
  const std::string mode = argv[1];
  if (mode == "env") {
    std::printf("ENV RANK=%s WORLD_SIZE=%s LOCAL_RANK=%s LOCAL_WORLD_SIZE=%s GROUP_RANK=%s "
                "MASTER_ADDR=%s MASTER_PORT=%s RESTART=%s TORCHELASTIC_RESTART=%s TOKEN_LEN=%zu "
                "AGENT_STORE=%s/%s\n",
                env("RANK").c_str(), env("WORLD_SIZE").c_str(), env("LOCAL_RANK").c_str(),
                env("LOCAL_WORLD_SIZE").c_str(), env("GROUP_RANK").c_str(), env("MASTER_ADDR").c_str(),
                env("MASTER_PORT").c_str(), env("EMBER_RESTART_COUNT").c_str(),
                env("TORCHELASTIC_RESTART_COUNT").c_str(), env("EMBER_STORE_TOKEN").size(),
                env("TORCHELASTIC_USE_AGENT_STORE").c_str(), env("EMBER_USE_AGENT_STORE").c_str());
    std::printf("second line\nno newline at end");
    std::fflush(stdout);
    std::fprintf(stderr, "to stderr\n");
    return 0;
  }
  if (mode == "affinity") {  // the CPUs ember-run let this worker run on
    std::printf("AFFINITY RANK=%s CPUS=%s\n", env("RANK").c_str(), ember::cpu_list_string(ember::allowed_cpus()).c_str());
    return 0;
  }
  if (mode == "store") {
    auto store = connect_store();
    store->set("rank/" + env("RANK"), env("RANK"));
    barrier(*store, "b");
    int64_t sum = 0;
    for (int r = 0; r < world_size(); ++r) sum += std::stoi(store->get_string("rank/" + std::to_string(r)));
    std::printf("STORE OK rank %d sum %lld\n", rank(), static_cast<long long>(sum));
    return 0;
  }
  if (mode == "fail" && argc == 5) {
    const int fail_rank = std::atoi(argv[2]);
    const std::string how = argv[3], dir = argv[4];
    write_file(dir + "/pid_" + env("RANK"), std::to_string(::getpid()));
    if (rank() != fail_rank) sleep_until_stopped();
    wait_for_all(dir, "pid_");
    std::printf("rank %d failing now\n", rank());
    std::fflush(stdout);
    if (how == "sigkill") ::raise(SIGKILL);
    if (how.rfind("exit:", 0) == 0) return std::atoi(how.c_str() + 5);
    return 64;
  }
  if (mode == "exit-then-sigkill" && argc == 3) {
    // Rank 0 exits with code 1 first; rank 1 kills itself 50 ms later, as a peer of a SIGKILLed
    // rank can exit before the kernel lets the launcher reap the killed one.
    const std::string dir = argv[2];
    write_file(dir + "/pid_" + env("RANK"), std::to_string(::getpid()));
    wait_for_all(dir, "pid_");
    if (rank() == 0) return 1;
    if (rank() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      ::raise(SIGKILL);
    }
    sleep_until_stopped();
  }
  if (mode == "fail-first" && argc == 4) {
    const int fail_rank = std::atoi(argv[2]);
    const int code = std::atoi(argv[3]);
    const int attempt = std::atoi(env("EMBER_RESTART_COUNT").c_str());
    auto store = connect_store();
    if (attempt == 0) {
      store->set("stale_from_attempt_0", std::string("1"));
      barrier(*store, "first");
      if (rank() == fail_rank) return code;
      sleep_until_stopped();
    }
    if (store->check({"stale_from_attempt_0"})) {
      std::printf("STALE store after restart\n");
      return 5;
    }
    barrier(*store, "again");
    std::printf("RECOVERED rank %d attempt %d\n", rank(), attempt);
    return 0;
  }
  if (mode == "trap" && argc == 3) {
    const std::string dir = argv[2];
    std::snprintf(g_signal_path, sizeof g_signal_path, "%s/signal_%d", dir.c_str(), rank());
    struct sigaction sa {};
    sa.sa_handler = record_signal;
    ::sigaction(SIGTERM, &sa, nullptr);
    ::sigaction(SIGINT, &sa, nullptr);
    write_file(dir + "/ready_" + env("RANK"), "1");
    sleep_until_stopped();
  }
  if (mode == "ignore-term" && argc == 4) {
    const int fail_rank = std::atoi(argv[2]);
    const std::string dir = argv[3];
    ::signal(SIGTERM, SIG_IGN);
    write_file(dir + "/pid_" + env("RANK"), std::to_string(::getpid()));
    if (rank() != fail_rank) sleep_until_stopped();
    wait_for_all(dir, "pid_");
    return 1;
  }
  if (mode == "grandchild" && argc == 4) {
    const int fail_rank = std::atoi(argv[2]);
    const std::string dir = argv[3];
    pid_t child = ::fork();
    if (child == 0) {
      write_file(dir + "/child_" + env("RANK"), std::to_string(::getpid()));
      sleep_until_stopped();
    }
    wait_for_all(dir, "child_");
    if (rank() != fail_rank) sleep_until_stopped();
    return 2;
  }
  if (mode == "setsid-grandchild" && argc == 3) {  // a child that leaves the worker's process group
    const std::string dir = argv[2];
    if (::fork() == 0) {
      ::setsid();
      write_file(dir + "/child_" + env("RANK"), std::to_string(::getpid()));
      sleep_until_stopped();
    }
    wait_for_all(dir, "child_");
    sleep_until_stopped();
  }
  if (mode == "daemon" && argc == 3) {
    const std::string dir = argv[2];
    if (::fork() == 0) {
      write_file(dir + "/child_" + env("RANK"), std::to_string(::getpid()));
      sleep_until_stopped();
    }
    wait_for_all(dir, "child_");
    return 0;
  }
  std::fprintf(stderr, "launcher_test_worker: bad arguments\n");
  return 64;
}
