#include "launcher/launch_options.h"

#include <charconv>
#include <functional>
#include <map>

namespace ember::launcher {

namespace {

int64_t parse_int(const std::string& flag, const std::string& text, int64_t lo, int64_t hi) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || text.empty())
    throw UsageError("--" + flag + " expects an integer, got '" + text + "'");
  if (v < lo || v > hi)
    throw UsageError("--" + flag + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                     "], got " + text);
  return v;
}

std::string normalize(std::string name) {
  for (auto& c : name)
    if (c == '_') c = '-';
  return name;
}

}  // namespace

std::string usage_text() {
  return "usage: ember-run [--nproc-per-node N] [--nnodes M --node-rank R --master-addr A "
         "--master-port P]\n"
         "                 [--local-addr A] [--max-restarts K] [--log-dir D] [--monitor-interval-ms MS]\n"
         "                 [--stop-timeout-ms MS] [--cpu-bind auto|none] program [args...]\n"
         "\n"
         "Starts N worker processes of `program` on this node (rank = node_rank * N + local_rank),\n"
         "sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT,\n"
         "EMBER_STORE_TOKEN and EMBER_RESTART_COUNT/TORCHELASTIC_RESTART_COUNT for each, hosts the\n"
         "TCPStore on node 0 (TORCHELASTIC_USE_AGENT_STORE=True tells rank 0 not to host one),\n"
         "prefixes every output line with \"[rank N]: \", and when a worker fails\n"
         "stops the others and restarts the group up to K times. Exits with the failing worker's\n"
         "code (128 + signal for a signal). With --nnodes > 1, export the same EMBER_STORE_TOKEN on\n"
         "every node and give --master-port; --local-addr tells the workers this node's address\n"
         "(EMBER_TCP_HOST). Restarts are rounds counted in node 0's store: a failure on any node\n"
         "moves every node to the next round, and a node (re)started late joins the current one.\n"
         "--cpu-bind auto (the default, as mpirun's --bind-to core)\n"
         "runs each local rank on its own block of the CPUs ember-run may use, when there are at least\n"
         "as many as ranks; none leaves the workers unbound.\n";
}

LaunchOptions parse_launch_options(int argc, const char* const* argv) {
  LaunchOptions o;
  using Setter = std::function<void(const std::string& flag, const std::string& value)>;
  const std::map<std::string, Setter> flags = {
      {"nproc-per-node", [&](auto& f, auto& v) { o.nproc_per_node = int(parse_int(f, v, 1, 4096)); }},
      {"nnodes", [&](auto& f, auto& v) { o.nnodes = int(parse_int(f, v, 1, 65536)); }},
      {"node-rank", [&](auto& f, auto& v) { o.node_rank = int(parse_int(f, v, 0, 65535)); }},
      {"master-addr", [&](auto& f, auto& v) {
         if (v.empty()) throw UsageError("--" + f + " must not be empty");
         o.master_addr = v;
       }},
      {"master-port", [&](auto& f, auto& v) { o.master_port = int(parse_int(f, v, 0, 65535)); }},
      {"local-addr", [&](auto& f, auto& v) {
         if (v.empty()) throw UsageError("--" + f + " must not be empty");
         o.local_addr = v;
       }},
      {"max-restarts", [&](auto& f, auto& v) { o.max_restarts = int(parse_int(f, v, 0, 1000000)); }},
      {"log-dir", [&](auto& f, auto& v) {
         if (v.empty()) throw UsageError("--" + f + " must not be empty");
         o.log_dir = v;
       }},
      {"monitor-interval-ms",
       [&](auto& f, auto& v) { o.monitor_interval_ms = parse_int(f, v, 1, 3'600'000); }},
      {"stop-timeout-ms", [&](auto& f, auto& v) { o.stop_timeout_ms = parse_int(f, v, 0, 3'600'000); }},
      {"cpu-bind", [&](auto& f, auto& v) {
         if (v != "auto" && v != "none") throw UsageError("--" + f + " expects auto or none, got '" + v + "'");
         o.cpu_bind = v == "auto";
       }},
  };
  bool master_port_given = false;
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg == "-h" || arg == "--help") {
      o.help = true;
      return o;
    }
    if (arg.size() < 2 || arg[0] != '-') break;  // the program
    if (arg.rfind("--", 0) != 0) throw UsageError("unknown option '" + arg + "'");
    std::string name = arg.substr(2), value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    name = normalize(name);
    auto it = flags.find(name);
    if (it == flags.end()) throw UsageError("unknown option '--" + name + "'");
    if (!has_value) {
      if (i + 1 >= argc) throw UsageError("--" + name + " needs a value");
      value = argv[++i];
    }
    it->second(name, value);
    if (name == "master-port") master_port_given = true;
  }
  if (i >= argc) throw UsageError("no program to run");
  o.program = argv[i];
  for (++i; i < argc; ++i) o.program_args.emplace_back(argv[i]);
  if (o.node_rank >= o.nnodes)
    throw UsageError("--node-rank must be below --nnodes (" + std::to_string(o.nnodes) + "), got " +
                     std::to_string(o.node_rank));
  if (o.nnodes > 1 && (!master_port_given || o.master_port == 0))
    throw UsageError("--nnodes > 1 needs an explicit, non-zero --master-port shared by every node");
  if (o.nnodes == 1 && o.node_rank != 0) throw UsageError("--node-rank must be 0 on a single node");
  if (int64_t(o.nproc_per_node) * o.nnodes > (1 << 24)) throw UsageError("world size too large");
  return o;
}

}  // namespace ember::launcher
