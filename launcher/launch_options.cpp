#include "launcher/launch_options.h"

#include "core/cli.h"

namespace ember::launcher {

namespace {

using ember::cli::int_in;
using ember::cli::not_empty;

// Every flag with both spellings, --dashes and torchrun's --under_scores; writes into `o`.
std::unique_ptr<CLI::App> command_line(LaunchOptions& o) {
  auto app = ember::cli::make_app(
      "ember-run",
      "Starts N worker processes of `program` on this node (rank = node_rank * N + local_rank), sets RANK, "
      "WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT, EMBER_STORE_TOKEN and "
      "EMBER_RESTART_COUNT/TORCHELASTIC_RESTART_COUNT for each, hosts the TCPStore on node 0 "
      "(TORCHELASTIC_USE_AGENT_STORE=True tells rank 0 not to host one), prefixes every output line with "
      "\"[rank N]: \", and when a worker fails stops the others and restarts the group up to K times. Exits with "
      "the failing worker's code (128 + signal for a signal). With --nnodes > 1, export the same "
      "EMBER_STORE_TOKEN on every node and give --master-port; --local-addr tells the workers this node's address "
      "(EMBER_TCP_HOST). Restarts are rounds counted in node 0's store: a failure on any node moves every node to "
      "the next round, and a node (re)started late joins the current one.",
      "program [args...]");
  // Everything from the first argument that is not a flag (the program), or after "--", is the
  // program's: CLI11 leaves it in remaining().
  app->prefix_command();
  auto names = [](const std::string& dashed) {
    std::string under = dashed;
    for (size_t i = 2; i < under.size(); ++i)
      if (under[i] == '-') under[i] = '_';
    return under == dashed ? dashed : dashed + "," + under;
  };
  app->add_option(names("--nproc-per-node"), o.nproc_per_node, "worker processes on this node")
      ->check(int_in(1, 4096))
      ->type_name("N");
  app->add_option(names("--nnodes"), o.nnodes, "nodes")->check(int_in(1, 65536))->type_name("M");
  app->add_option(names("--node-rank"), o.node_rank, "this node's rank")->check(int_in(0, 65535))->type_name("R");
  app->add_option(names("--master-addr"), o.master_addr, "node 0's address (the store's host)")
      ->check(not_empty())
      ->type_name("A");
  app->add_option(names("--master-port"), o.master_port, "the store's port; 0 picks a free one (single node only)")
      ->check(int_in(0, 65535))
      ->type_name("P");
  app->add_option(names("--local-addr"), o.local_addr, "this node's address for the other ranks (EMBER_TCP_HOST)")
      ->check(not_empty())
      ->type_name("A");
  app->add_option(names("--max-restarts"), o.max_restarts, "restarts of the group after a failure")
      ->check(int_in(0, 1000000))
      ->type_name("K");
  app->add_option(names("--log-dir"), o.log_dir, "also write each rank's output to D/rank_N.log")
      ->check(not_empty())
      ->type_name("D");
  app->add_option(names("--monitor-interval-ms"), o.monitor_interval_ms, "how often the workers are checked")
      ->check(int_in(1, 3'600'000))
      ->type_name("MS");
  app->add_option(names("--stop-timeout-ms"), o.stop_timeout_ms, "SIGTERM to SIGKILL grace when stopping workers")
      ->check(int_in(0, 3'600'000))
      ->type_name("MS");
  app->add_option_function<std::string>(
         names("--cpu-bind"), [&o](const std::string& v) { o.cpu_bind = v == "auto"; },
         "auto (as mpirun's --bind-to core): each local rank runs on its own block of the CPUs ember-run may "
         "use, when there are at least as many as ranks; none leaves the workers unbound")
      ->check(ember::cli::one_of({"auto", "none"}))
      ->default_str("auto")
      ->type_name("MODE");
  // --ft: Note [ember-run --ft] in main.cpp; the ranks' side is parallel/ft/manager.h.
  app->add_flag("--ft", o.ft,
                "fault tolerance (docs/FAULT_TOLERANCE.md): a rank that dies, or stays silent for --ft-timeout "
                "(ember-run kills it), is dropped while the others go on, and is replaced up to --max-restarts "
                "times per rank; the replacement takes its state from a live rank");
  auto seconds = [](int64_t& ms) {
    return [&ms](double s) { ms = static_cast<int64_t>(s * 1000.0 + 0.5); };
  };
  app->add_option_function<double>(names("--ft-timeout"), seconds(o.ft_timeout_ms),
                                   "--ft: seconds a rank may stay silent before it is dropped and killed; also the "
                                   "bound of every collective")
      ->check(ember::cli::number_in(0.05, 86400, false, "a number of seconds"))
      ->default_str("10")
      ->type_name("S");
  app->add_option(names("--ft-min-ranks"), o.ft_min_ranks,
                  "--ft: with fewer live ranks than this for --ft-quorum-timeout, the ranks fail naming the "
                  "missing ones")
      ->check(int_in(1, 1 << 24))
      ->type_name("N");
  app->add_option_function<double>(names("--ft-quorum-timeout"), seconds(o.ft_quorum_timeout_ms),
                                   "--ft: how long the ranks wait below --ft-min-ranks")
      ->check(ember::cli::number_in(0.05, 86400, false, "a number of seconds"))
      ->default_str("60")
      ->type_name("S");
  return app;
}

}  // namespace

std::string usage_text() {
  LaunchOptions o;
  return command_line(o)->help();
}

LaunchOptions parse_launch_options(int argc, const char* const* argv) {
  LaunchOptions o;
  auto app = command_line(o);
  try {
    app->parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    o.help = true;
    return o;
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }
  std::vector<std::string> rest = app->remaining();
  if (!rest.empty() && rest.front() == "--") {
    rest.erase(rest.begin());
  } else if (!rest.empty() && rest.front().size() > 1 && rest.front()[0] == '-') {
    throw UsageError("unknown option '" + rest.front() + "'");
  }
  if (rest.empty()) throw UsageError("no program to run");
  o.program = rest.front();
  o.program_args.assign(rest.begin() + 1, rest.end());
  const bool master_port_given = app->count("--master-port") > 0;
  if (o.node_rank >= o.nnodes)
    throw UsageError("--node-rank must be below --nnodes (" + std::to_string(o.nnodes) + "), got " +
                     std::to_string(o.node_rank));
  if (o.nnodes > 1 && (!master_port_given || o.master_port == 0))
    throw UsageError("--nnodes > 1 needs an explicit, non-zero --master-port shared by every node");
  if (o.nnodes == 1 && o.node_rank != 0) throw UsageError("--node-rank must be 0 on a single node");
  if (int64_t(o.nproc_per_node) * o.nnodes > (1 << 24)) throw UsageError("world size too large");
  const bool ft_tuned =
      app->count("--ft-timeout") > 0 || app->count("--ft-min-ranks") > 0 || app->count("--ft-quorum-timeout") > 0;
  if (ft_tuned && !o.ft) throw UsageError("--ft-timeout, --ft-min-ranks and --ft-quorum-timeout need --ft");
  if (o.ft && o.ft_min_ranks > o.world_size())
    throw UsageError("--ft-min-ranks " + std::to_string(o.ft_min_ranks) + " is more than the " +
                     std::to_string(o.world_size()) + " ranks of the job");
  return o;
}

}  // namespace ember::launcher
