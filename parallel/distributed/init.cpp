#include "parallel/distributed/init.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <mutex>

#include "core/config.h"
#include "core/error.h"
#include "parallel/distributed/file_store.h"
#include "parallel/distributed/prefix_store.h"
#include "parallel/distributed/slurm.h"
#include "parallel/distributed/tcp/process_group_tcp.h"
#include "parallel/distributed/tcp_store.h"
#include "parallel/distributed/torch_tcp_store.h"
#if EMBER_HAVE_MPI
#include "parallel/distributed/mpi/process_group_mpi.h"
#endif
#if EMBER_HAVE_NCCL
#include "core/device.h"
#include "parallel/distributed/detail/local_device.h"
#include "parallel/distributed/nccl/process_group_nccl.h"
#endif

namespace ember::parallel {

namespace {

// Where ember-run keeps the job's restart round (launcher/main.cpp).
const std::string kLauncherRoundKey = "ember-run/round";
constexpr size_t kMpiTokenBytes = 64;  // make_store_token()'s length

std::mutex g_mutex;
std::shared_ptr<ProcessGroup> g_default;  // guarded by g_mutex

const char* get(const char* name) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : nullptr;
}

std::optional<int> int_var(const char* name, long lo, long hi) {
  const char* v = get(name);
  if (v == nullptr) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  EMBER_CHECK_T(ValueError, errno == 0 && end != v && *end == '\0', "init_process_group: environment variable ",
                name, "='", v, "' is not an integer");
  EMBER_CHECK_T(ValueError, x >= lo && x <= hi, "init_process_group: environment variable ", name, "=", x,
                " is out of range [", lo, ", ", hi, "]");
  return static_cast<int>(x);
}

// "tcp://host:port" -> host, port; throws ValueError.
std::pair<std::string, int> parse_tcp_url(const std::string& url) {
  const std::string rest = url.substr(6);
  const size_t colon = rest.rfind(':');
  EMBER_CHECK_T(ValueError, colon != std::string::npos && colon > 0 && colon + 1 < rest.size(),
                "init_process_group: init_method '", url, "' is not tcp://host:port");
  std::string host = rest.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  char* end = nullptr;
  const long port = std::strtol(rest.c_str() + colon + 1, &end, 10);
  EMBER_CHECK_T(ValueError, *end == '\0' && port >= 1 && port <= 65535, "init_process_group: init_method '", url,
                "' has an invalid port");
  return {host, static_cast<int>(port)};
}

// Whether every address `host` stands for is a loopback one (127.0.0.0/8, ::1), so that a
// store there is out of the network's reach. A name that does not resolve counts as exposed.
bool is_loopback_host(const std::string& host) {
  if (host == "localhost") return true;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) return false;
  bool all = true;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      const uint32_t ip = ntohl(reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr.s_addr);
      all = all && (ip >> 24) == 127;
    } else if (a->ai_family == AF_INET6) {
      all = all && IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr);
    } else {
      all = false;
    }
  }
  ::freeaddrinfo(res);
  return all;
}

constexpr const char* kAllowNoTokenEnv = "EMBER_STORE_ALLOW_NO_TOKEN";

// Note [Tokenless stores]: a store rank 0 hosts holds the tcp group's join secret, so one
// without a token on an address others can reach lets them pose as a rank. Every rank
// refuses that configuration (the same environment gives the same answer everywhere, so
// all fail at once instead of the clients timing out) unless the user opted in.
void refuse_exposed_tokenless_store(const std::string& host, const std::string& listen_on) {
  const char* allow = get(kAllowNoTokenEnv);
  if (allow != nullptr && std::string(allow) == "1") return;
  if (is_loopback_host(listen_on)) return;
  EMBER_THROW(ValueError, "init_process_group: rank 0 would host the store at ", listen_on,
              " (MASTER_ADDR ", host, ") without a token, so anyone who can reach it could read the "
              "process group's join secret and write keys. Export a token on every rank, e.g. in the "
              "batch script: export ", kStoreTokenEnv, "=$(openssl rand -hex 32) (srun and mpirun pass "
              "the environment to every task); or set ", kAllowNoTokenEnv, "=1 to accept an open store",
              allow != nullptr ? std::string(" (") + kAllowNoTokenEnv + "='" + allow + "' is not 1)" : "");
}

// Note [Store exposure]: a store rank 0 hosts (no launcher's store) listens on the interface
// of the address the ranks were told to reach it at (MASTER_ADDR or tcp://host), not on every
// interface, so MASTER_ADDR=127.0.0.1 keeps it off the network; EMBER_STORE_BIND_ADDR
// overrides that (e.g. 0.0.0.0 behind NAT). Under mpirun, where no launcher hands out a
// token, rank 0 draws one and MPI carries it to every rank, so only the job's own processes
// can authenticate. parallel/README.md says what is protected under each launcher.
std::shared_ptr<Store> make_tcp_store(const std::string& host, int port, int rank, int world_size,
                                      const DistributedEnv& env, int64_t timeout_ms) {
  if (env.torch_store) {
    // torchrun's agent hosts a PyTorch TCPStore: speak its protocol, as a client only.
    TorchTCPStoreOptions to;
    to.timeout_ms = timeout_ms;
    return std::make_shared<TorchTCPStore>(host, static_cast<uint16_t>(port), to);
  }
  TCPStoreOptions o;
  o.timeout_ms = timeout_ms;
  o.token = env.store_token;  // empty: TCPStore reads EMBER_STORE_TOKEN itself
#if EMBER_HAVE_MPI
  if (o.token.empty() && env.under_mpirun && !env.launcher_store) {
    // Every rank of MPI_COMM_WORLD takes this path (same environment), so the broadcast matches.
    const std::string mine = mpi::world_rank() == 0 ? make_store_token() : std::string();
    const std::vector<uint8_t> bytes =
        mpi::broadcast_bytes(std::vector<uint8_t>(mine.begin(), mine.end()), kMpiTokenBytes);
    o.token.assign(bytes.begin(), bytes.end());
  }
#endif
  const char* bind = get("EMBER_STORE_BIND_ADDR");
  if (!env.launcher_store && o.token.empty()) refuse_exposed_tokenless_store(host, bind != nullptr ? bind : host);
  if (!env.launcher_store && rank == 0) {
    o.is_server = true;
    o.world_size = world_size;
    o.wait_for_workers = false;  // the process group's rendezvous waits for everyone
    o.bind_address = bind != nullptr ? bind : host;
    try {
      return std::make_shared<TCPStore>(host, static_cast<uint16_t>(port), o);
    } catch (const DistributedError& e) {
      EMBER_THROW(DistributedError, e.what(), "; rank 0 hosts the store on the interface of ", host,
                  " (MASTER_ADDR); set EMBER_STORE_BIND_ADDR to listen elsewhere (0.0.0.0: every interface)");
    }
  }
  return std::make_shared<TCPStore>(host, static_cast<uint16_t>(port), o);
}

std::shared_ptr<Store> make_store(const InitOptions& options, int rank, int world_size, const DistributedEnv& env) {
  if (options.store) return options.store;
  const std::string& m = options.init_method;
  if (m.empty() || m == "env://") {
    EMBER_CHECK_T(ValueError, env.master_addr.has_value(),
                  "init_process_group: environment variable MASTER_ADDR is not set (the address of rank 0 or of "
                  "the launcher's store; ember-run and torchrun set it), and no store was given");
    EMBER_CHECK_T(ValueError, env.master_port.has_value(),
                  "init_process_group: environment variable MASTER_PORT is not set (the store's port; ember-run "
                  "and torchrun set it), and no store was given");
    return make_tcp_store(*env.master_addr, *env.master_port, rank, world_size, env, options.timeout_ms);
  }
  if (m.rfind("tcp://", 0) == 0) {
    const auto [host, port] = parse_tcp_url(m);
    return make_tcp_store(host, port, rank, world_size, env, options.timeout_ms);
  }
  if (m.rfind("file://", 0) == 0) {
    const std::string path = m.substr(7);
    EMBER_CHECK_T(ValueError, !path.empty(), "init_process_group: init_method '", m, "' names no file");
    return std::make_shared<FileStore>(path, world_size, options.timeout_ms);
  }
  EMBER_THROW(ValueError, "init_process_group: unknown init_method '", m,
              "'; expected env://, tcp://host:port or file:///path");
}

}  // namespace

DistributedEnv read_distributed_env() {
  DistributedEnv env;
  env.rank = int_var("RANK", 0, INT_MAX - 1);
  env.world_size = int_var("WORLD_SIZE", 1, INT_MAX);
  env.local_rank = int_var("LOCAL_RANK", 0, INT_MAX - 1);
  env.local_world_size = int_var("LOCAL_WORLD_SIZE", 1, INT_MAX);
  if (!env.rank && !env.world_size) {
    env.rank = int_var("OMPI_COMM_WORLD_RANK", 0, INT_MAX - 1);
    env.world_size = int_var("OMPI_COMM_WORLD_SIZE", 1, INT_MAX);
    env.under_mpirun = env.rank.has_value() || env.world_size.has_value();
    if (!env.local_rank) env.local_rank = int_var("OMPI_COMM_WORLD_LOCAL_RANK", 0, INT_MAX - 1);
    if (!env.local_world_size) env.local_world_size = int_var("OMPI_COMM_WORLD_LOCAL_SIZE", 1, INT_MAX);
  }
  if (const char* a = get("MASTER_ADDR")) env.master_addr = a;
  env.master_port = int_var("MASTER_PORT", 1, 65535);
  if (!env.rank && !env.world_size) {
    const SlurmStep slurm = read_slurm_step();
    if (slurm.in_step()) {
      env.under_srun = true;
      env.rank = slurm.rank;
      env.world_size = slurm.world_size;
      if (!env.local_rank) env.local_rank = slurm.local_rank;
      if (!env.local_world_size) env.local_world_size = slurm.local_world_size;
      if (!env.master_addr && !slurm.hosts.empty()) env.master_addr = slurm.hosts.front();
      if (!env.master_port && slurm.job_id) env.master_port = slurm_master_port(*slurm.job_id, slurm.step_id);
    }
  }
  if (const char* t = get("EMBER_STORE_TOKEN")) env.store_token = t;
  const char* agent = get("EMBER_USE_AGENT_STORE");
  const char* torch_agent = get("TORCHELASTIC_USE_AGENT_STORE");
  const bool ember_agent = agent != nullptr && std::string(agent) == "1";
  env.torch_store = !ember_agent && torch_agent != nullptr &&
                    (std::string(torch_agent) == "True" || std::string(torch_agent) == "1");
  env.launcher_store = ember_agent || env.torch_store;
  if (auto rc = int_var("EMBER_RESTART_COUNT", 0, INT_MAX)) {
    env.restart_count = *rc;
  } else if (auto trc = int_var("TORCHELASTIC_RESTART_COUNT", 0, INT_MAX)) {
    env.restart_count = *trc;
  }
  return env;
}

std::shared_ptr<ProcessGroup> init_process_group(const std::string& backend, InitOptions options) {
  EMBER_CHECK_T(ValueError, backend == "tcp" || backend == "mpi" || backend == "nccl",
                "init_process_group: unknown backend '", backend, "'; expected \"tcp\", \"mpi\" or \"nccl\"");
  EMBER_CHECK_T(ValueError, options.timeout_ms > 0, "init_process_group: timeout_ms must be positive, got ",
                options.timeout_ms);
  const DistributedEnv env = read_distributed_env();
  std::shared_ptr<ProcessGroup> pg;

  if (backend == "mpi") {
#if EMBER_HAVE_MPI
    ProcessGroupMPIOptions mo;
    mo.timeout_ms = options.timeout_ms;
    pg = ProcessGroupMPI::create(mo);
    EMBER_CHECK_T(ValueError, options.rank < 0 || options.rank == pg->rank(), "init_process_group: options.rank=",
                  options.rank, " but MPI says this process is rank ", pg->rank());
    EMBER_CHECK_T(ValueError, options.world_size < 0 || options.world_size == pg->size(),
                  "init_process_group: options.world_size=", options.world_size, " but MPI's world has ",
                  pg->size(), " processes");
#else
    EMBER_THROW(ValueError, "init_process_group: backend 'mpi' is not built in (configure with EMBER_MPI=ON and "
                            "OpenMPI installed)");
#endif
  } else {
#if !EMBER_HAVE_NCCL
    EMBER_CHECK_T(ValueError, backend != "nccl",
                  "init_process_group: backend 'nccl' is not built in (it needs the CUDA build with NCCL)");
#endif
    const int rank = options.rank >= 0 ? options.rank : env.rank.value_or(-1);
    const int world_size = options.world_size >= 0 ? options.world_size : env.world_size.value_or(-1);
    EMBER_CHECK_T(ValueError, rank >= 0,
                  "init_process_group: environment variable RANK is not set (nor OMPI_COMM_WORLD_RANK, nor "
                  "SLURM_PROCID); start the program with ember-run, torchrun, mpirun or srun, or pass options.rank");
    EMBER_CHECK_T(ValueError, world_size >= 1,
                  "init_process_group: environment variable WORLD_SIZE is not set (nor OMPI_COMM_WORLD_SIZE, nor "
                  "SLURM_NTASKS); start the program with ember-run, torchrun, mpirun or srun, or pass "
                  "options.world_size");
    EMBER_CHECK_T(ValueError, rank < world_size, "init_process_group: rank ", rank, " is not below world_size ",
                  world_size, " (RANK / WORLD_SIZE)");
    std::shared_ptr<Store> base;
#if EMBER_HAVE_NCCL && EMBER_HAVE_MPI
    // nccl under mpirun without a store: its unique id travels through MPI instead.
    if (backend == "nccl" && !options.store && options.init_method.empty() && !env.master_addr && env.under_mpirun) {
      ProcessGroupNCCLOptions no;
      no.timeout_ms = options.timeout_ms;
      // local_rank % device_count: a rank shown only its own GPU (CUDA_VISIBLE_DEVICES) takes device 0.
      if (env.local_rank) no.device = detail::local_device_index(env.local_rank, cuda_device_count());
      // Only MPI_COMM_WORLD's rank 0 draws the id; everyone gets its bytes.
      std::vector<uint8_t> id = mpi::world_rank() == 0 ? ProcessGroupNCCL::make_unique_id() : std::vector<uint8_t>();
      id = mpi::broadcast_bytes(std::move(id), ProcessGroupNCCL::kUniqueIdBytes);
      pg = std::make_shared<ProcessGroupNCCL>(std::move(id), rank, world_size, no);
    }
#endif
    if (!pg) {
      base = make_store(options, rank, world_size, env);
      // ember-run's node 0 writes the job's round in its store (Note [Restart rounds] in
      // launcher/main.cpp): a rank of a node started late takes it from there.
      int64_t round = env.restart_count;
      if (env.launcher_store && !env.torch_store && base->check({kLauncherRoundKey}))
        round = detail::parse_counter(kLauncherRoundKey, base->get(kLauncherRoundKey));
      const std::string prefix = "ember_pg/" + options.group_name + "/" + std::to_string(round);
      // This rank's k-th group on this store pairs with every other rank's k-th.
      const int64_t generation = base->add(prefix + "/inits/" + std::to_string(rank), 1);
      auto store = std::make_shared<PrefixStore>(prefix + "/" + std::to_string(generation), base);
      if (backend == "tcp") {
        ProcessGroupTCPOptions to;
        to.timeout_ms = options.timeout_ms;
        pg = std::make_shared<ProcessGroupTCP>(store, rank, world_size, to);
      } else {
#if EMBER_HAVE_NCCL
        ProcessGroupNCCLOptions no;
        no.timeout_ms = options.timeout_ms;
        if (env.local_rank) no.device = detail::local_device_index(env.local_rank, cuda_device_count());
        pg = std::make_shared<ProcessGroupNCCL>(store, rank, world_size, no);
#endif
      }
      // EMBER_DISTRIBUTED_DEBUG=INFO or DETAIL: every rank records the last collective it
      // entered in this group's part of the store, so a failure or timeout names each rank's.
      if (pg->debug_level() != DebugLevel::kOff) pg->set_debug_store(store);
    }
  }
  pg->set_debug_timeout_ms(options.timeout_ms);  // the desync check waits as long as a collective
  std::lock_guard<std::mutex> lock(g_mutex);
  g_default = pg;
  return pg;
}

std::shared_ptr<ProcessGroup> default_process_group() {
  std::lock_guard<std::mutex> lock(g_mutex);
  EMBER_CHECK(g_default != nullptr, "default_process_group: init_process_group has not been called");
  return g_default;
}

bool is_initialized() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_default != nullptr;
}

void destroy_process_group() {
  std::shared_ptr<ProcessGroup> old;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    old.swap(g_default);
  }
}

}  // namespace ember::parallel
