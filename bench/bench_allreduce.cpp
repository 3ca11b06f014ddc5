// ember-bench-allreduce: all_reduce bus bandwidth with 2 ranks on loopback, float32 tensors of
// 4 KiB .. 64 MiB (powers of 4), for the tcp backend (two forked processes, a FileStore for
// rendezvous, each bound to its own CPU as mpirun binds its ranks) and the mpi backend (this program re-launched under mpirun -np 2), plus the
// machine's single-thread copy rate as the limit. One `name value unit` line per figure:
//   memcpy_256mib_gbps              bytes copied per second by one memcpy of 256 MiB (GB/s)
//   tcp_loopback_64mib_bidir_gbps   two processes each sending 64 MiB to the other at once over
//                                   one loopback TCP connection (plain send/recv, 4 MiB buffers,
//                                   cold memory): the traffic of a 2-rank 64 MiB all_reduce without
//                                   its work, a reference for how fast loopback is right now
//   <backend>_allreduce_<size>_busbw_gbps   bytes * 2(n-1)/n / time, median over repetitions
//   tcp_socket_allreduce_64mib_*    the tcp backend with same_host_copy off: every byte through
//                                   loopback TCP (the tcp figures above copy between the ranks'
//                                   memory on one host, Note [Same-host all_reduce])
//   <backend>_allreduce_64mib_cpu_ms        CPU time (user + system, both ranks together) per
//                                   64 MiB all_reduce: what it costs, however loaded the host
//   gloo_allreduce_<size>_busbw_gbps        PyTorch's torch.distributed gloo backend, the same sweep
//                                   (bench_allreduce_torch.py under bench::peer_python(), 2
//                                   spawned ranks, bounded by EMBER_BENCH_PEER_TIMEOUT_S), after
//                                   ember's ranks; with peer_torch_version
//   tcp_vs_<mpi|gloo>_allreduce_<size>_busbw_ratio  tcp / the peer, per size (> 1: tcp is faster)
//   allreduce_vs_gloo_busbw_ratio   tcp / gloo at 64 MiB (goal >= 2)
// GB/s are 10^9 bytes per second, as nccl-tests count. Each repetition starts after a barrier
// and is timed on rank 0 from the all_reduce call to the end of its wait.
// --backend nccl (Note [nccl all_reduce benchmark]) runs the nccl backend instead, over the GPUs:
//   nccl_allreduce_<size>_busbw_gbps        as above, float32 on one GPU per rank (>= 2 GPUs)
//   nccl_allreduce_<size>_algbw_gbps        bytes / time (with one GPU the only figure: a 1-rank
//                                   all_reduce moves nothing between GPUs, busbw = 0 by definition)
// and without a GPU or without NCCL in the build prints a `#` line saying why and exits 0.
// Flags (for tuning): --segment-bytes N, --block-bytes N, --shm-bytes N, --socket-buffer-bytes N (tcp),
// --backend tcp|mpi|gloo|nccl (--only is the same; default: tcp, mpi and gloo), --min-bytes N / --max-bytes N
// (restrict the sweep).
//
// Note [nccl all_reduce benchmark]
// One process per GPU, as NCCL wants it: NCCL refuses two ranks of one communicator on one GPU
// ("Duplicate GPU detected", ncclInvalidUsage), so with one GPU the job is one rank and reports
// algbw (the time of NCCL's one-rank all_reduce, a device-local copy) and a `#` line instead of
// nccl_allreduce_64mib_busbw_gbps. The ranks are this program re-executed (fork + exec of
// /proc/self/exe --nccl-child RANK WORLD STORE): the parent asked the CUDA runtime for the device
// count, and a forked child may not use a runtime its parent initialized. They meet over a
// FileStore; rank r uses cuda:r. Each repetition is timed on rank 0 from the call to the end of
// Work::wait, which blocks the host until the collective's end event (the group's stream), after
// a barrier and a synchronize of the current stream so no earlier work is counted.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "bench/harness.h"
#include "core/cli.h"
#include "core/config.h"
#include "core/cpu_affinity.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "parallel/distributed/file_store.h"
#include "parallel/distributed/tcp/process_group_tcp.h"
#include "core/stream.h"
#if EMBER_HAVE_MPI
#include "parallel/distributed/mpi/process_group_mpi.h"
#endif
#if EMBER_HAVE_NCCL
#include "parallel/distributed/nccl/process_group_nccl.h"
#endif

namespace {

using ember::bench::median;

using Clock = std::chrono::steady_clock;
using namespace ember;
using namespace ember::parallel;

constexpr size_t kKiB = 1024, kMiB = 1024 * 1024;

std::string size_name(size_t bytes) {
  return bytes >= kMiB ? std::to_string(bytes / kMiB) + "mib" : std::to_string(bytes / kKiB) + "kib";
}

int reps_for(size_t bytes) {
  if (bytes <= 256 * kKiB) return 200;
  if (bytes <= kMiB) return 60;
  if (bytes <= 4 * kMiB) return 30;
  if (bytes <= 16 * kMiB) return 15;
  return 11;
}

// Runs the sweep on one rank; rank 0 prints the figures.
size_t g_min_bytes = 4 * kKiB, g_max_bytes = 64 * kMiB;

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// The ranks that print run in other processes (forked, or under mpirun): each figure also goes
// to the file named by EMBER_BENCH_ALLREDUCE_RESULTS, from which the parent prints the ratios.
void record(const std::string& name, double busbw) {
  const char* path = std::getenv("EMBER_BENCH_ALLREDUCE_RESULTS");
  if (path == nullptr || *path == 0) return;
  if (FILE* f = std::fopen(path, "a")) {
    std::fprintf(f, "%s %.6f\n", name.c_str(), busbw);
    std::fclose(f);
  }
}

// In the order they were written: backend by backend, small sizes first.
std::vector<std::pair<std::string, double>> read_records(const std::string& path) {
  std::vector<std::pair<std::string, double>> out;
  std::ifstream in(path);
  std::string name;
  double value = 0;
  while (in >> name >> value) out.emplace_back(name, value);
  return out;
}

// Returns false (after saying so on stderr) when a result was wrong.
bool sweep(ProcessGroup& pg, const std::string& backend, size_t min_bytes = g_min_bytes,
           size_t max_bytes = g_max_bytes, Device device = Device::cpu()) {
  const int n = pg.size();
  const Stream stream = current_stream(device);
  bool right = true;
  for (size_t bytes = 4 * kKiB; bytes <= 64 * kMiB; bytes *= 4) {
    if (bytes < min_bytes || bytes > max_bytes) continue;
    const int64_t numel = static_cast<int64_t>(bytes / sizeof(float));
    Tensor t = ones({numel}, TensorOptions().device(device));
    for (int w = 0; w < 3; ++w) pg.all_reduce(t)->wait();
    std::vector<double> seconds;
    double cpu = 0;
    for (int r = 0; r < reps_for(bytes); ++r) {
      native::fill_(t, 1.0);  // every repetition sums ones: each element must come out n
      pg.barrier()->wait();
      stream.synchronize();  // the fill is done before the clock starts (a no-op on CPU)
      const double cpu_start = cpu_seconds();
      const auto start = Clock::now();
      pg.all_reduce(t)->wait();
      seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
      cpu += cpu_seconds() - cpu_start;
    }
    const Tensor host = device.is_cpu() ? t : native::to(t, Device::cpu());
    const double lo = native::amin(host).item(), hi = native::amax(host).item();
    if (lo != n || hi != n) {
      std::fprintf(stderr, "%s all_reduce of %s: elements in [%g, %g], expected all %d\n", backend.c_str(),
                   size_name(bytes).c_str(), lo, hi, n);
      right = false;
    }
    Tensor cpu_all = scalar_tensor(cpu / reps_for(bytes), kFloat64);  // both ranks' CPU per op
    pg.all_reduce(cpu_all)->wait();
    if (pg.rank() == 0) {
      const double algbw = static_cast<double>(bytes) / median(seconds) / 1e9;
      const double busbw = algbw * 2.0 * (n - 1) / n;
      if (device.is_cuda())
        std::printf("%s_allreduce_%s_algbw_gbps %.3f GB/s\n", backend.c_str(), size_name(bytes).c_str(), algbw);
      if (n > 1 || !device.is_cuda())
        std::printf("%s_allreduce_%s_busbw_gbps %.3f GB/s\n", backend.c_str(), size_name(bytes).c_str(), busbw);
      record(backend + "_" + size_name(bytes), busbw);
      if (bytes == 64 * kMiB)
        std::printf("%s_allreduce_64mib_cpu_ms %.2f ms\n", backend.c_str(), cpu_all.item() * 1e3);
      std::fflush(stdout);
    }
  }
  return right;
}

double memcpy_gbps() {
  const size_t bytes = 256 * kMiB;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  std::vector<double> s;
  for (int r = 0; r < 7; ++r) {
    const auto start = Clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    s.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    src[static_cast<size_t>(r)] = dst[bytes / 2 + static_cast<size_t>(r)];  // keep the copies observable
  }
  return static_cast<double>(bytes) / median(s) / 1e9;
}

// Both processes send `bytes` and receive `bytes` at the same time over one connection;
// returns bytes per direction per second (rank 0's median), or -1 on failure.
double loopback_bidir_gbps(size_t bytes) {
  int ls = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof a;
  if (::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(ls, 1) != 0 ||
      ::getsockname(ls, reinterpret_cast<sockaddr*>(&a), &alen) != 0)
    return -1;
  int p[2];
  if (::pipe(p) != 0) return -1;
  std::fflush(stdout);
  const pid_t pid = ::fork();
  int fd;
  if (pid == 0) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) ::_exit(1);
  } else {
    fd = ::accept(ls, nullptr, nullptr);
  }
  int one = 1, buf = 4 << 20;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf);
  std::vector<char> out(bytes, 1), in(bytes, 0);
  std::vector<double> seconds;
  for (int rep = 0; rep < 7; ++rep) {
    char c = 0;
    if (pid == 0) {  // line the two up
      if (::write(fd, &c, 1) != 1 || ::read(fd, &c, 1) != 1) ::_exit(1);
    } else if (::read(fd, &c, 1) != 1 || ::write(fd, &c, 1) != 1) {
      break;
    }
    const auto start = Clock::now();
    std::thread tx([&] {
      for (size_t off = 0; off < bytes;) {
        const ssize_t w = ::send(fd, out.data() + off, std::min<size_t>(kMiB, bytes - off), MSG_NOSIGNAL);
        if (w <= 0) return;
        off += static_cast<size_t>(w);
      }
    });
    for (size_t off = 0; off < bytes;) {
      const ssize_t g = ::recv(fd, in.data() + off, std::min<size_t>(kMiB, bytes - off), 0);
      if (g <= 0) break;
      off += static_cast<size_t>(g);
    }
    tx.join();
    seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  ::close(fd);
  ::close(ls);
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  ::close(p[0]);
  ::close(p[1]);
  if (seconds.size() < 7) return -1;
  return static_cast<double>(bytes) / median(seconds) / 1e9;
}

// Waits for every child; 1 when one did not exit with status 0.
int wait_all(const std::vector<pid_t>& pids) {
  int rc = 0;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
  }
  return rc;
}

// `name` prefixes the figures; sizes in [min_bytes, max_bytes].
int run_tcp(const ProcessGroupTCPOptions& base, const std::string& name, size_t min_bytes, size_t max_bytes) {
  const std::string path = "/tmp/ember_bench_allreduce_" + std::to_string(::getpid());
  std::remove(path.c_str());
  std::fflush(stdout);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < 2; ++rank) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      int code = 0;
      try {
        // Each rank on its own CPU, as mpirun places the mpi ranks (--bind-to core).
        if (const std::vector<int> cpus = cpu_block(allowed_cpus(), rank, 2); !cpus.empty()) bind_process_to_cpus(cpus);
        auto store = std::make_shared<FileStore>(path, 2, 60'000);
        ProcessGroupTCPOptions o = base;
        o.host = "127.0.0.1";
        o.timeout_ms = 120'000;
        ProcessGroupTCP pg(store, rank, 2, o);
        if (!sweep(pg, name, min_bytes, max_bytes)) code = 1;
        pg.barrier()->wait();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "tcp rank %d: %s\n", rank, e.what());
        code = 1;
      }
      std::fflush(stdout);
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  const int rc = wait_all(pids);
  std::remove(path.c_str());
  return rc;
}

#if EMBER_HAVE_MPI
int run_mpi_child() {
  auto pg = ProcessGroupMPI::create({});
  const bool right = sweep(*pg, "mpi");
  pg->barrier()->wait();
  return right ? 0 : 1;
}
#endif

int run_mpi(const char* self) {
#if EMBER_HAVE_MPI && defined(EMBER_MPIEXEC)
  if (::access(EMBER_MPIEXEC, X_OK) != 0) {
    std::printf("# mpi_allreduce skipped: %s is not executable\n", EMBER_MPIEXEC);
    return 0;
  }
  const std::string cmd = std::string(EMBER_MPIEXEC) + " --allow-run-as-root --oversubscribe -np 2 " + self +
                          " --mpi-child --min-bytes " + std::to_string(g_min_bytes) + " --max-bytes " +
                          std::to_string(g_max_bytes);
  std::fflush(stdout);
  const int status = std::system(cmd.c_str());
  if (status != 0) {
    std::printf("# mpi_allreduce failed: '%s' exited with status %d\n", cmd.c_str(), status);
    return 1;
  }
  return 0;
#else
  (void)self;
  std::printf("# mpi_allreduce skipped: ember was built without MPI (EMBER_HAVE_MPI=0)\n");
  return 0;
#endif
}

// See Note [nccl all_reduce benchmark].
#if EMBER_HAVE_NCCL
int run_nccl_child(int rank, int world, const std::string& store_path) {
  try {
    auto store = std::make_shared<FileStore>(store_path, world, 120'000);
    ProcessGroupNCCLOptions o;
    o.device = rank;
    o.timeout_ms = 120'000;
    ProcessGroupNCCL pg(store, rank, world, o);
    const bool right = sweep(pg, "nccl", g_min_bytes, g_max_bytes, Device::cuda(rank));
    pg.barrier()->wait();
    return right ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nccl rank %d: %s\n", rank, e.what());
    return 1;
  }
}
#endif

int run_nccl(const char* self) {
#if EMBER_HAVE_NCCL
  const int gpus = cuda_device_count();
  if (gpus == 0) {
    std::printf("# nccl_allreduce skipped: no CUDA device is visible\n");
    return 0;
  }
  if (gpus == 1)
    std::printf("# nccl_allreduce_64mib_busbw_gbps skipped: one GPU, so one rank (NCCL refuses two ranks on one "
                "GPU); the 1-rank figures are algbw\n");
  const std::string store = "/tmp/ember_bench_allreduce_nccl_" + std::to_string(::getpid());
  std::remove(store.c_str());
  std::fflush(stdout);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < gpus; ++rank) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      const std::string r = std::to_string(rank), w = std::to_string(gpus), lo = std::to_string(g_min_bytes),
                        hi = std::to_string(g_max_bytes);
      ::execl(self, self, "--nccl-child", r.c_str(), w.c_str(), store.c_str(), "--min-bytes", lo.c_str(),
              "--max-bytes", hi.c_str(), static_cast<char*>(nullptr));
      std::fprintf(stderr, "nccl rank %d: cannot execute %s: %s\n", rank, self, std::strerror(errno));
      ::_exit(127);
    }
    pids.push_back(pid);
  }
  const int rc = wait_all(pids);
  std::remove(store.c_str());
  if (rc != 0) std::printf("# nccl_allreduce failed: a rank exited with an error (see stderr)\n");
  return rc;
#else
  (void)self;
  std::printf("# nccl_allreduce skipped: ember was built without NCCL (EMBER_HAVE_NCCL=0)\n");
  return 0;
#endif
}

}  // namespace

namespace {

// torch.distributed's gloo over the same sweep (bench_allreduce_torch.py), after ember's ranks;
// its figures are printed and recorded as "gloo_<size>". A peer that fails or hangs (bounded)
// is reported in one `#` line.
void run_gloo() {
  const std::string python = ember::bench::peer_python();
  std::string why;
  const std::string version = ember::bench::torch_version(python, why);
  if (version.empty()) {
    ember::bench::print_peer_version("", "gloo peer", why);
    return;
  }
  const int timeout_s = ember::bench::peer_timeout_s();
  const auto run = ember::bench::run_bounded({python, EMBER_BENCH_ALLREDUCE_TORCH_SCRIPT, std::to_string(g_min_bytes),
                                              std::to_string(g_max_bytes), std::to_string(timeout_s)},
                                             timeout_s);
  int figures = 0;
  for (const std::string& line : ember::bench::output_lines(run.output)) {
    char size[32];
    double busbw = 0;
    if (std::sscanf(line.c_str(), "gloo_allreduce_%31[^_]_busbw_gbps %lf", size, &busbw) == 2) {
      if (figures++ == 0) ember::bench::print_peer_version(version, "gloo peer", "");
      std::printf("%s\n", line.c_str());
      record(std::string("gloo_") + size, busbw);
    }
  }
  if (figures == 0) ember::bench::print_peer_version("", "gloo peer", run.timed_out ? "timed out" : "no figures");
  if (run.timed_out) {
    std::printf("# gloo peer timed out after %d s (EMBER_BENCH_PEER_TIMEOUT_S); its process group was killed\n",
                timeout_s);
  } else if (!run.ok()) {
    std::printf("# gloo peer failed: %s\n", ember::bench::one_line(run.output, 300).c_str());
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  ProcessGroupTCPOptions tcp_options;
  std::string only;
  bool mpi_child = false;
  std::tuple<int, int, std::string> nccl_child{-1, 0, ""};
  auto app = ember::cli::make_app("ember-bench-allreduce",
                                  "all_reduce bus bandwidth with 2 ranks on loopback (tcp, mpi, PyTorch's gloo), "
                                  "or over the GPUs with --backend nccl. Prints `name value unit` lines.");
  app->add_option("--backend,--only", only, "run this backend only (default: tcp, mpi and gloo)")
      ->check(ember::cli::one_of({"tcp", "mpi", "gloo", "nccl"}));
  app->add_option("--min-bytes", g_min_bytes, "smallest all_reduce of the sweep (bytes)")->check(ember::cli::at_least(1));
  app->add_option("--max-bytes", g_max_bytes, "largest all_reduce of the sweep (bytes)")->check(ember::cli::at_least(1));
  app->add_option("--segment-bytes", tcp_options.segment_bytes, "tcp: ProcessGroupTCPOptions::segment_bytes")
      ->check(ember::cli::at_least(1));
  app->add_option("--block-bytes", tcp_options.block_bytes, "tcp: ProcessGroupTCPOptions::block_bytes")
      ->check(ember::cli::at_least(1));
  app->add_option("--shm-bytes", tcp_options.shm_bytes, "tcp: ProcessGroupTCPOptions::shm_bytes")
      ->check(ember::cli::at_least(4096));
  app->add_option("--socket-buffer-bytes", tcp_options.socket_buffer_bytes,
                  "tcp: ProcessGroupTCPOptions::socket_buffer_bytes")
      ->check(ember::cli::int_in(0, std::numeric_limits<int>::max()));
  app->add_option("--cma-min-bytes", tcp_options.cma_min_bytes, "tcp: ProcessGroupTCPOptions::cma_min_bytes")
      ->check(ember::cli::at_least(0));
  // This program's own re-launches: a rank under mpirun, a rank of the nccl sweep.
  app->add_flag("--mpi-child", mpi_child)->group("");
  app->add_option("--nccl-child", nccl_child)->group("");
  ember::bench::parse_flags(*app, argc, argv);
  const auto& [nccl_rank, nccl_world, nccl_store] = nccl_child;
  if (nccl_rank >= 0) {
#if EMBER_HAVE_NCCL
    return run_nccl_child(nccl_rank, nccl_world, nccl_store);
#else
    std::fprintf(stderr, "--nccl-child %d of %d (%s): ember was built without NCCL\n", nccl_rank, nccl_world,
                 nccl_store.c_str());
    return 1;
#endif
  }
  char self[4096] = {};
  if (!mpi_child) ember::bench::start("ember-bench-allreduce");
  const ssize_t len = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) std::snprintf(self, sizeof self, "%s", argv[0]);
  if (only == "nccl") return run_nccl(self);
  if (mpi_child) {
#if EMBER_HAVE_MPI
    return run_mpi_child();
#else
    return 1;
#endif
  }
  char results[] = "/tmp/ember-bench-allreduce.XXXXXX";
  const int results_fd = ::mkstemp(results);
  if (results_fd >= 0) {
    ::close(results_fd);
    ::setenv("EMBER_BENCH_ALLREDUCE_RESULTS", results, 1);
  }
  if (g_max_bytes >= 64 * kMiB) std::printf("memcpy_256mib_gbps %.3f GB/s\n", memcpy_gbps());
  int rc = 0;
  if (only.empty() || only == "tcp") {
    if (g_max_bytes >= 64 * kMiB) std::printf("tcp_loopback_64mib_bidir_gbps %.3f GB/s\n", loopback_bidir_gbps(64 * kMiB));
    rc |= run_tcp(tcp_options, "tcp", g_min_bytes, g_max_bytes);
    if (g_max_bytes >= 64 * kMiB) {
      // The same 64 MiB with every byte through loopback TCP: what the same-host copy saves.
      ProcessGroupTCPOptions socket_only = tcp_options;
      socket_only.same_host_copy = false;
      rc |= run_tcp(socket_only, "tcp_socket", 64 * kMiB, 64 * kMiB);
    }
  }
  if (only.empty() || only == "mpi") rc |= run_mpi(self);
  if (only.empty() || only == "gloo") run_gloo();
  if (results_fd >= 0) {
    // tcp against its peers, size by size: > 1 means tcp moved more bytes per second.
    const auto r = read_records(results);
    for (const auto& [name, busbw] : r) {
      const size_t cut = name.rfind('_');  // "<backend>_<size>"
      const std::string backend = name.substr(0, cut), size = name.substr(cut + 1);
      if (backend == "mpi" || backend == "gloo") continue;
      for (const std::string peer : {"mpi", "gloo"}) {
        const auto p = std::find_if(r.begin(), r.end(), [&](const auto& e) { return e.first == peer + "_" + size; });
        if (p != r.end() && p->second > 0)
          std::printf("%s_vs_%s_allreduce_%s_busbw_ratio %.3f ratio\n", backend.c_str(), peer.c_str(), size.c_str(),
                      busbw / p->second);
      }
    }
    const auto find = [&](const std::string& key) {
      const auto e = std::find_if(r.begin(), r.end(), [&](const auto& x) { return x.first == key; });
      return e != r.end() ? e->second : 0.0;
    };
    if (find("tcp_64mib") > 0 && find("gloo_64mib") > 0)
      std::printf("allreduce_vs_gloo_busbw_ratio %.3f ratio\n", find("tcp_64mib") / find("gloo_64mib"));
    std::remove(results);
  }
  return rc;
}
