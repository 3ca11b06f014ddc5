// ember-bench-ddp: DistributedDataParallel scaling over the tcp backend on one host. The "nn"
// issue's LSTM training step (as ember-bench-lstm and ember-bench-dp): Embedding(64, 32) ->
// LSTM(32, 256, 2 layers, batch_first) over pack_padded_sequence(enforce_sorted=false) ->
// pad_packed_sequence(total_length=50) -> Linear(256, 64) -> cross_entropy over the valid
// positions -> Adam, batch 64 per rank, lengths uniform in [10, 50] (seed 0, the same lengths
// for every rank, so every rank and the single process do the same work; tokens differ by rank).
//
// The parent forks two ranks (one intra-op thread each, set_num_threads(1)); rank 0 hosts a
// TCPStore on 127.0.0.1 (a free port, passed to the parent over a pipe and on to rank 1) and
// both build a ProcessGroupTCP on it. Each repetition times, after a barrier, one plain step of
// an undistributed copy of the model on rank 0 alone (rank 1 sleeps in the next barrier: this is
// the one-process, one-thread figure); then, after an untimed plain step on both ranks (Note
// [Settle step]), the two-rank steps below, each after a barrier. Alternating them inside the
// same processes lets a loaded host slow all alike. Each child
// calls setsid(), so each rank is its own scheduler autogroup as a separately launched process
// would be (with autogroup scheduling, two ranks in one group get one group's share of a busy
// host). Prints `name value unit` lines (medians over the timed steps):
//   ddp_step_ms_1r / ddp_step_ms_2r        wall time per step (2r: the slower rank's, per step)
//   ddp_scaling_efficiency_2r              2-rank throughput / (2 x 1-rank) = 1r / 2r, DDP with
//                                          its default options
//   ddp_overlap_fraction                   Reducer::last_overlap_fraction() on rank 0
//   ddp_step_cpu_ms_1r / ddp_step_cpu_ms_2r  process CPU time per step (2r: mean of the ranks)
//   ddp_cpu_scaling_2r                     cpu_1r / cpu_2r: what DDP adds in CPU work per rank,
//                                          the load-independent part of the efficiency (waits
//                                          on the peer are not in it)
//   ddp_step_ms_2r_no_comm                 the DDP step on both ranks at once with a comm hook
//                                          that communicates nothing
//   ddp_no_comm_efficiency_2r              1r / 2r_no_comm: the ceiling communication cannot beat,
//                                          DDP's bookkeeping plus what two busy cores cost each
//                                          other on this machine
//   ddp_efficiency_vs_no_comm_2r           2r_no_comm / 2r: the share of that ceiling reached
//   ddp_tail_wait_ms_r0 / _r1              Reducer::last_wait_ms() per rank: the end of backward
//                                          waiting for its buckets (unhidden communication plus
//                                          waiting for the slower rank)
//   plain_step_ms_2r                       the undistributed step on both ranks at once: what two
//   plain_concurrent_efficiency_2r         busy cores cost each other without DDP (1r / that)
//   ddp_step_ms_2r_bucket_view             DDP with gradient_as_bucket_view (no copy back)
//   ddp_scaling_efficiency_2r_bucket_view  1r / that
//   ddp_vs_plain_concurrent_2r             plain_step_ms_2r / ddp_step_ms_2r: DDP's two-rank step
//                                          against two plain processes stepping at the same time,
//                                          the cost DDP itself adds on this machine (goal >= 0.98)
//   ddp_step_cpu_ms_2r_no_comm / plain_step_cpu_ms_2r  process CPU time per step of those two
//                                          (mean of the ranks)
//   ddp_cpu_vs_plain_concurrent_2r         plain_step_cpu_ms_2r / ddp_step_cpu_ms_2r: the same
//                                          comparison in CPU time, which a loaded host disturbs
//                                          far less than the wall times (with each rank bound to
//                                          one CPU, DDP's communication threads run on it)
//   ddp_step_ms_2r_deterministic           DDP with its deterministic option (num_shards 2: each
//                                          rank's batch is one shard; Note [World-size invariance])
//   deterministic_step_vs_default_ratio_2r that / ddp_step_ms_2r (goal <= 1.15)
//   zero_optimizer_bytes_ratio_2r          the optimizer state a first Adam step leaves allocated
//                                          (allocator stats) under ZeroRedundancyOptimizer, the
//                                          larger rank's, over plain Adam's (ideal 0.5)
//   torch_ddp_step_ms_1r / _2r             PyTorch (bench::peer_python(), bench_ddp_torch.py, gloo) on the
//                                          same model and batch, after ember's ranks, same binding;
//                                          bounded by EMBER_BENCH_DDP_TORCH_TIMEOUT_S (default 300 s,
//                                          then its process group is killed and a `#` line says so)
//   torch_ddp_scaling_efficiency_2r        its 1r / 2r
//   ddp_step_vs_torch_ddp_ratio            ember's ddp_step_ms_2r / torch's (goal <= 0.3)
//   machine_load_avg                       1-minute load average (/proc/loadavg) after the run
// plus `#` lines with the load before and after and the core count: read the wall figures
// against them (the 2r figure needs two idle cores). EMBER_BENCH_DDP_STEPS sets the timed steps
// (default 25, at least 20); EMBER_BENCH_DDP_BUCKET_CAP_MB the DDP bucket cap (default 25, as
// DistributedDataParallelOptions; a `#` line lists the buckets); EMBER_BENCH_DDP_TIMEOUT_S bounds the whole run (default 600): the
// group, store and DDP waits time out well before, and past it the parent kills the ranks.
// Each rank is bound to its own CPU(s) as `ember-run --cpu-bind auto` (its default) and
// mpirun's --bind-to core bind them (EMBER_BENCH_DDP_CPU_BIND=none: unbound; seen unbound
// 0.949-0.950, bound 0.954-0.963); the one-process figure runs on rank 0, bound the same.
// Children are always reaped; they die with the parent (PR_SET_PDEATHSIG).
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/harness.h"
#include "core/cpu_affinity.h"
#include "core/allocator.h"
#include "core/generator.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/random.h"
#include "core/thread_pool.h"
#include "nn/embedding.h"
#include "nn/functional.h"
#include "nn/linear.h"
#include "nn/optim/adam.h"
#include "nn/rnn.h"
#include "nn/utils/rnn.h"
#include "parallel/distributed/tcp/process_group_tcp.h"
#include "parallel/distributed/tcp_store.h"
#include "parallel/distributed_data_parallel.h"
#include "parallel/zero_redundancy_optimizer.h"
#include "bench/tagger_model.h"

// Note [Settle step]
// Rank 1 sleeps in a barrier while rank 0 times the one-process step. The two-rank step that
// came right after that sleep was measured 1-2% slower than the same step elsewhere in the
// repetition (whichever variant held that place; rank 0 then waited for rank 1 at the end of
// backward), an effect of the idle virtual CPU rather than of DDP: a training loop never idles
// between steps. So one untimed plain step on both ranks follows the one-process step, and every
// timed two-rank step follows a busy one.

namespace {

using ember::bench::median;

using namespace ember;
using Clock = std::chrono::steady_clock;

using namespace ember::bench;  // the model of ember-bench-dp (bench/tagger_model.h)
constexpr int64_t kBatch = 64;
constexpr int kWarmup = 5;
constexpr int kWorld = 2;
constexpr int64_t kGroupTimeoutMs = 120'000;  // every collective, the rendezvous and DDP's waits


struct Batch {
  Tensor tokens, lengths, targets;  // targets [B * T]: -100 (ignored) past each sequence's end
};

// Lengths from seed 0 (shared by all); tokens and targets from `seed`.
Batch make_batch(uint64_t seed) {
  Batch b;
  Generator len_gen(0);
  b.lengths = randint(10, kMaxLen + 1, {kBatch}, TensorOptions(kInt64), &len_gen);
  Generator gen(seed);
  b.tokens = randint(0, kVocab, {kBatch, kMaxLen}, TensorOptions(kInt64), &gen);
  Tensor targets = randint(0, kVocab, {kBatch, kMaxLen}, TensorOptions(kInt64), &gen);
  Tensor steps = native::unsqueeze(arange(kMaxLen), 0);
  Tensor pad = native::ge(steps, native::unsqueeze(b.lengths, 1));
  b.targets = native::reshape(native::masked_fill(targets, pad, -100), {-1});
  return b;
}

template <class Forward>
StepTime train_step(Forward&& forward, optim::Adam& adam, const Batch& b) {
  const double c0 = process_cpu_ms();
  const auto t0 = Clock::now();
  adam.zero_grad(/*set_to_none=*/true);
  Tensor logits = forward(b.tokens, b.lengths);
  nn::functional::CrossEntropyOptions ce;
  ce.ignore_index = -100;
  Tensor loss = nn::functional::cross_entropy(reshape(logits, {-1, kVocab}), b.targets, ce);
  loss.backward();
  adam.step();
  return {std::chrono::duration<double, std::milli>(Clock::now() - t0).count(), process_cpu_ms() - c0};
}

double load_avg_1min() { return bench::load_average_1min(); }

std::vector<uint8_t> to_bytes(const std::vector<double>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(double));
  if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

std::vector<double> from_bytes(const std::vector<uint8_t>& b) {
  std::vector<double> v(b.size() / sizeof(double));
  if (!v.empty()) std::memcpy(v.data(), b.data(), v.size() * sizeof(double));
  return v;
}

using bench::BoundedRun;
using bench::run_bounded;

// PyTorch's DDP (gloo) on the same model and batch in the same run: bench_ddp_torch.py spawns
// its own two ranks (bound to their own CPUs, one thread each) after ember's ranks are done.
// Bounded by EMBER_BENCH_DDP_TORCH_TIMEOUT_S (default 300 s): past it the script's process
// group is killed and a `#` line says so (the script bounds its own waits a little sooner).
void run_torch_ddp_peer(double ember_2r_ms, const Tensor& lengths, int steps) {
  const std::string py = bench::peer_python();
  const int timeout_s = bench::env_int("EMBER_BENCH_DDP_TORCH_TIMEOUT_S", bench::peer_timeout_s());
  std::string csv;
  for (int64_t v : lengths.to_vector<int64_t>()) {
    if (!csv.empty()) csv += ',';  // (one expression of + tripped GCC 12's -Wrestrict here)
    csv += std::to_string(v);
  }
  const std::vector<std::string> argv{py, EMBER_BENCH_DDP_TORCH_SCRIPT, csv,
                                      std::to_string(steps), std::to_string(kWarmup), std::to_string(timeout_s)};
  const BoundedRun run = run_bounded(argv, timeout_s);
  double t1 = 0, t2 = 0;
  std::string version;
  for (const std::string& line : bench::output_lines(run.output)) {
    double v = 0;
    if (std::sscanf(line.c_str(), "torch_ddp_step_ms_1r %lf", &v) == 1) t1 = v;
    if (std::sscanf(line.c_str(), "torch_ddp_step_ms_2r %lf", &v) == 1) t2 = v;
    bench::parse_torch_line(line, version);
  }
  if (run.timed_out || t1 <= 0 || t2 <= 0) bench::print_peer_version("", "torch DDP peer", run.timed_out ? "timed out" : "no figures");
  if (run.timed_out) {
    std::printf("# torch DDP peer timed out after %d s (EMBER_BENCH_DDP_TORCH_TIMEOUT_S); its process group was "
                "killed; ember figures only\n", timeout_s);
    std::fflush(stdout);
    return;
  }
  if (t1 <= 0 || t2 <= 0) {
    std::string tail = run.output.size() > 600 ? run.output.substr(run.output.size() - 600) : run.output;
    for (char& c : tail) c = c == '\n' ? '|' : c;
    std::printf("# torch DDP peer unavailable (%s %s did not report: %s); ember figures only\n", argv[0].c_str(),
                argv[1].c_str(), tail.c_str());
    std::fflush(stdout);
    return;
  }
  bench::print_peer_version(version, "torch DDP peer", "");
  std::printf("# torch %s, DDP over gloo, 2 ranks bound to their own CPUs, one thread each\n", version.c_str());
  std::printf("torch_ddp_step_ms_1r %.3f ms\n", t1);
  std::printf("torch_ddp_step_ms_2r %.3f ms\n", t2);
  std::printf("torch_ddp_scaling_efficiency_2r %.3f ratio\n", t1 / t2);
  std::printf("ddp_step_vs_torch_ddp_ratio %.3f ratio\n", ember_2r_ms / t2);
  std::fflush(stdout);
}

// One rank's whole run. Rank 0 hosts the store and writes its port to `port_fd`; rank 1
// connects to `port`. Rank 0 prints the figures.
int run_rank(int rank, int steps, double bucket_cap_mb, bool cpu_bind, int port_fd, uint16_t port) {
  // As ember-run's --cpu-bind auto: each rank on its own block of this process's CPUs.
  if (cpu_bind) {
    const std::vector<int> block = cpu_block(allowed_cpus(), rank, kWorld);
    if (!block.empty()) bind_process_to_cpus(block);
  }
  set_num_threads(1);
  parallel::TCPStoreOptions so;
  so.is_server = rank == 0;
  so.world_size = kWorld;
  so.wait_for_workers = false;  // the port must reach rank 1 first; the group's rendezvous waits
  so.timeout_ms = 60'000;
  so.bind_address = "127.0.0.1";
  so.token = "ember-bench-ddp";
  auto store = std::make_shared<parallel::TCPStore>("127.0.0.1", port, so);
  if (rank == 0) {
    const std::string line = std::to_string(store->port()) + "\n";
    if (::write(port_fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      std::fprintf(stderr, "ember-bench-ddp: rank 0 could not pass the store port: %s\n", std::strerror(errno));
      return 1;
    }
    ::close(port_fd);
  }
  parallel::ProcessGroupTCPOptions po;
  po.host = "127.0.0.1";
  po.timeout_ms = kGroupTimeoutMs;
  auto pg = std::make_shared<parallel::ProcessGroupTCP>(store, rank, kWorld, po);

  // The same initial weights everywhere (DDP broadcasts rank 0's anyway).
  manual_seed(0);
  auto single = std::make_shared<TaggerModel>();
  auto replica = single->clone_as();
  parallel::DistributedDataParallelOptions dopt;
  dopt.timeout_ms = kGroupTimeoutMs;
  dopt.bucket_cap_mb = bucket_cap_mb;
  parallel::DistributedDataParallel<TaggerModel> ddp(replica, pg, dopt);
  // The ceiling: the same DDP step on both ranks at once with a hook that communicates
  // nothing (its Work is finished when returned). What it loses against the one-process step
  // is DDP's own bookkeeping plus what running two ranks at once costs the machine (shared
  // memory bandwidth and caches, clock): communication can only add to that.
  auto silent_replica = single->clone_as();
  parallel::DistributedDataParallel<TaggerModel> silent(silent_replica, pg, dopt);
  silent.register_comm_hook([](parallel::ProcessGroup&, parallel::GradBucket&) {
    auto done = std::make_shared<parallel::Work>("no communication");
    done->finish();
    return parallel::CommHookResult{done, nullptr};
  });
  optim::Adam adam1(single->parameters(), optim::AdamOptions(1e-3));
  optim::Adam adam2(replica->parameters(), optim::AdamOptions(1e-3));
  optim::Adam adam3(silent_replica->parameters(), optim::AdamOptions(1e-3));
  // The same plain step as the one-process figure, but on both ranks at once: what two busy
  // cores cost each other on this machine with no DDP at all.
  auto plain = single->clone_as();
  optim::Adam adam4(plain->parameters(), optim::AdamOptions(1e-3));
  auto both = [&](const Tensor& t, const Tensor& l) { return plain->forward(t, l); };
  // DDP with gradient_as_bucket_view: .grad are views of the buckets, no copy back.
  auto view_replica = single->clone_as();
  parallel::DistributedDataParallelOptions vopt = dopt;
  vopt.gradient_as_bucket_view = true;
  parallel::DistributedDataParallel<TaggerModel> ddp_view(view_replica, pg, vopt);
  optim::Adam adam5(view_replica->parameters(), optim::AdamOptions(1e-3));
  auto dist_view = [&](const Tensor& t, const Tensor& l) { return ddp_view(t, l); };
  // DDP's deterministic option, one shard per rank: the same work, summed exactly.
  auto det_replica = single->clone_as();
  parallel::DistributedDataParallelOptions detopt = dopt;
  detopt.deterministic = true;
  detopt.num_shards = kWorld;
  parallel::DistributedDataParallel<TaggerModel> ddp_det(det_replica, pg, detopt);
  optim::Adam adam6(det_replica->parameters(), optim::AdamOptions(1e-3));
  auto dist_det = [&](const Tensor& t, const Tensor& l) { return ddp_det(t, l); };
  auto one = [&](const Tensor& t, const Tensor& l) { return single->forward(t, l); };
  auto dist = [&](const Tensor& t, const Tensor& l) { return ddp(t, l); };
  auto quiet = [&](const Tensor& t, const Tensor& l) { return silent(t, l); };

  // Batch i of rank r: seed 1000 + 2 i + r; the single process cycles through rank 0's.
  std::vector<Batch> batches;
  for (int i = 0; i < 4; ++i) batches.push_back(make_batch(1000 + 2 * static_cast<uint64_t>(i) + rank));

  StepTimes st1, st2, st3, st4, st5, st6;
  std::vector<double> overlap, tail;
  for (int i = 0; i < kWarmup + steps; ++i) {
    const Batch& b = batches[static_cast<size_t>(i) % batches.size()];
    pg->barrier()->wait();
    StepTime s1;
    if (rank == 0) s1 = train_step(one, adam1, b);
    // Untimed: a step on both ranks, so that no timed two-rank step follows rank 1's idle wait
    // (Note [Settle step]).
    pg->barrier()->wait();
    train_step(both, adam4, b);
    pg->barrier()->wait();
    const StepTime s2 = train_step(dist, adam2, b);
    const double tail_wait = ddp.reducer().last_wait_ms();
    pg->barrier()->wait();
    const StepTime s3 = train_step(quiet, adam3, b);
    pg->barrier()->wait();
    const StepTime s4 = train_step(both, adam4, b);
    pg->barrier()->wait();
    const StepTime s5 = train_step(dist_view, adam5, b);
    pg->barrier()->wait();
    const StepTime s6 = train_step(dist_det, adam6, b);
    if (i < kWarmup) continue;
    st1.add(s1);
    st2.add(s2);
    st3.add(s3);
    st4.add(s4);
    st5.add(s5);
    st6.add(s6);
    tail.push_back(tail_wait);
    overlap.push_back(ddp.reducer().last_overlap_fraction());
  }

  // ZeroRedundancyOptimizer: the state bytes a first step leaves allocated, against plain Adam's.
  auto first_step_bytes = [](const std::function<void()>& step) {
    const int64_t before = memory_stats(Device::cpu()).allocated_bytes;
    step();
    return memory_stats(Device::cpu()).allocated_bytes - before;
  };
  auto backward_of = [&](const std::function<Tensor(const Tensor&, const Tensor&)>& forward) {
    const Batch& b = batches[0];
    nn::functional::CrossEntropyOptions ce;
    ce.ignore_index = -100;
    nn::functional::cross_entropy(reshape(forward(b.tokens, b.lengths), {-1, kVocab}), b.targets, ce).backward();
  };
  double zero_bytes_ratio = 0.0;
  {
    auto m = single->clone_as();
    optim::Adam plain_adam(m->parameters(), optim::AdamOptions(1e-3));
    backward_of([&](const Tensor& t, const Tensor& l) { return m->forward(t, l); });
    const int64_t plain_bytes = first_step_bytes([&] { plain_adam.step(); });
    auto z = single->clone_as();
    parallel::DistributedDataParallel<TaggerModel> zddp(z, pg, dopt);
    parallel::ZeroRedundancyOptimizer zopt(z->parameters(), pg, [](std::vector<Tensor> p) {
      return std::make_unique<optim::Adam>(std::move(p), optim::AdamOptions(1e-3));
    });
    backward_of([&](const Tensor& t, const Tensor& l) { return zddp(t, l); });
    const int64_t zero_bytes = first_step_bytes([&] { zopt.step(); });
    zero_bytes_ratio = plain_bytes > 0 ? static_cast<double>(zero_bytes) / static_cast<double>(plain_bytes) : 0.0;
  }

  double ember_2r = 0;
  if (rank != 0) {
    store->set("bench_ddp/rank1_zero_ratio", to_bytes({zero_bytes_ratio}));
    store->set("bench_ddp/rank1_wall", to_bytes(st2.wall));
    store->set("bench_ddp/rank1_cpu", to_bytes(st2.cpu));
    store->set("bench_ddp/rank1_wall_silent", to_bytes(st3.wall));
    store->set("bench_ddp/rank1_wall_plain", to_bytes(st4.wall));
    store->set("bench_ddp/rank1_cpu_silent", to_bytes(st3.cpu));
    store->set("bench_ddp/rank1_cpu_plain", to_bytes(st4.cpu));
    store->set("bench_ddp/rank1_wall_view", to_bytes(st5.wall));
    store->set("bench_ddp/rank1_tail_wait", to_bytes(tail));
    store->set("bench_ddp/rank1_wall_det", to_bytes(st6.wall));
  } else {
    const std::vector<double> other_wall = from_bytes(store->get("bench_ddp/rank1_wall"));
    const std::vector<double> other_cpu = from_bytes(store->get("bench_ddp/rank1_cpu"));
    const std::vector<double> other_silent = from_bytes(store->get("bench_ddp/rank1_wall_silent"));
    EMBER_CHECK(other_wall.size() == st2.wall.size() && other_cpu.size() == st2.cpu.size() &&
                    other_silent.size() == st3.wall.size(),
                "ember-bench-ddp: rank 1 sent ", other_wall.size(), " step times, expected ", st2.wall.size());
    const std::vector<double> other_plain = from_bytes(store->get("bench_ddp/rank1_wall_plain"));
    const std::vector<double> other_view = from_bytes(store->get("bench_ddp/rank1_wall_view"));
    const std::vector<double> other_tail = from_bytes(store->get("bench_ddp/rank1_tail_wait"));
    const std::vector<double> other_cpu3 = from_bytes(store->get("bench_ddp/rank1_cpu_silent"));
    const std::vector<double> other_cpu4 = from_bytes(store->get("bench_ddp/rank1_cpu_plain"));
    EMBER_CHECK(other_cpu3.size() == st3.cpu.size() && other_cpu4.size() == st4.cpu.size(),
                "ember-bench-ddp: rank 1 sent ", other_cpu4.size(), " plain CPU times, expected ", st4.cpu.size());
    EMBER_CHECK(other_plain.size() == st4.wall.size() && other_view.size() == st5.wall.size(),
                "ember-bench-ddp: rank 1 sent ", other_plain.size(), " plain step times, expected ", st4.wall.size());
    std::vector<double> step2(st2.wall.size()), cpu_mean2(st2.cpu.size()), step3(st3.wall.size()), step4(st4.wall.size()),
        step5(st5.wall.size()), cpu_mean3(st3.cpu.size()), cpu_mean4(st4.cpu.size());
    for (size_t k = 0; k < st2.wall.size(); ++k) {
      cpu_mean3[k] = 0.5 * (st3.cpu[k] + other_cpu3[k]);
      cpu_mean4[k] = 0.5 * (st4.cpu[k] + other_cpu4[k]);
      step2[k] = std::max(st2.wall[k], other_wall[k]);
      cpu_mean2[k] = 0.5 * (st2.cpu[k] + other_cpu[k]);
      step3[k] = std::max(st3.wall[k], other_silent[k]);
      step4[k] = std::max(st4.wall[k], other_plain[k]);
      step5[k] = std::max(st5.wall[k], other_view[k]);
    }
    const double m1 = median(st1.wall), m2 = median(step2), m3 = median(step3), m4 = median(step4), m5 = median(step5);
    ember_2r = m2;
    std::printf("ddp_step_ms_1r %.3f ms\n", m1);
    std::printf("ddp_step_ms_2r %.3f ms\n", m2);
    std::printf("ddp_scaling_efficiency_2r %.3f ratio\n", m2 > 0 ? m1 / m2 : 0.0);
    std::printf("ddp_overlap_fraction %.3f fraction\n", median(overlap));
    std::printf("ddp_step_cpu_ms_1r %.3f ms\n", median(st1.cpu));
    std::printf("ddp_step_cpu_ms_2r %.3f ms\n", median(cpu_mean2));
    std::printf("ddp_cpu_scaling_2r %.3f ratio\n", median(cpu_mean2) > 0 ? median(st1.cpu) / median(cpu_mean2) : 0.0);
    std::printf("ddp_step_ms_2r_no_comm %.3f ms\n", m3);
    std::printf("ddp_no_comm_efficiency_2r %.3f ratio\n", m3 > 0 ? m1 / m3 : 0.0);
    std::printf("ddp_efficiency_vs_no_comm_2r %.3f ratio\n", m2 > 0 ? m3 / m2 : 0.0);
    std::printf("ddp_tail_wait_ms_r0 %.3f ms\n", median(tail));
    std::printf("ddp_tail_wait_ms_r1 %.3f ms\n", median(other_tail));
    std::printf("plain_step_ms_2r %.3f ms\n", m4);
    std::printf("plain_concurrent_efficiency_2r %.3f ratio\n", m4 > 0 ? m1 / m4 : 0.0);
    std::printf("ddp_step_ms_2r_bucket_view %.3f ms\n", m5);
    std::printf("ddp_scaling_efficiency_2r_bucket_view %.3f ratio\n", m5 > 0 ? m1 / m5 : 0.0);
    std::printf("ddp_vs_plain_concurrent_2r %.3f ratio\n", m2 > 0 ? m4 / m2 : 0.0);
    {
      const std::vector<double> other_det = from_bytes(store->get("bench_ddp/rank1_wall_det"));
      std::vector<double> step6(st6.wall.size());
      for (size_t k = 0; k < st6.wall.size() && k < other_det.size(); ++k) step6[k] = std::max(st6.wall[k], other_det[k]);
      const double m6 = median(step6);
      std::printf("ddp_step_ms_2r_deterministic %.3f ms\n", m6);
      std::printf("deterministic_step_vs_default_ratio_2r %.3f ratio\n", m2 > 0 ? m6 / m2 : 0.0);
    }
    const double c2 = median(cpu_mean2), c3 = median(cpu_mean3), c4 = median(cpu_mean4);
    std::printf("ddp_step_cpu_ms_2r_no_comm %.3f ms\n", c3);
    std::printf("plain_step_cpu_ms_2r %.3f ms\n", c4);
    std::printf("ddp_cpu_vs_plain_concurrent_2r %.3f ratio\n", c2 > 0 ? c4 / c2 : 0.0);
    const std::vector<double> other_zero = from_bytes(store->get("bench_ddp/rank1_zero_ratio"));
    std::printf("zero_optimizer_bytes_ratio_2r %.3f ratio\n",
                std::max(zero_bytes_ratio, other_zero.empty() ? 0.0 : other_zero[0]));
    std::vector<Tensor> reduced;  // the Reducer's parameter list (see DistributedDataParallel)
    for (auto& [name, p] : replica->named_parameters()) {
      if (p.requires_grad()) reduced.push_back(p);
    }
    std::string sizes;
    for (const auto& bucket : ddp.reducer().bucket_parameter_indices()) {
      int64_t numel = 0;
      for (size_t p : bucket) numel += reduced[p].numel();
      sizes += (sizes.empty() ? "" : ", ") + std::to_string(numel * 4 / 1024) + " KiB";
    }
    std::printf("# %d timed steps after %d warm-up; bucket_cap_mb %.2f: %zu buckets (%s), %zu of them reduced in the "
                ".grad tensors themselves (Note [Direct buckets])\n",
                steps, kWarmup, bucket_cap_mb, ddp.reducer().bucket_parameter_indices().size(), sizes.c_str(),
                ddp.reducer().last_direct_buckets());
    std::printf("# ranks %s; rank 0 runs on CPUs %s (EMBER_BENCH_DDP_CPU_BIND=%s)\n",
                cpu_bind ? "bound to their own CPUs, as ember-run --cpu-bind auto binds them" : "not bound",
                cpu_list_string(allowed_cpus()).c_str(), cpu_bind ? "auto" : "none");
    std::fflush(stdout);
  }
  // Nobody leaves (and rank 0 takes the store server down) before both are done with the store.
  pg->barrier()->wait();
  if (rank == 0 && ember_2r > 0) run_torch_ddp_peer(ember_2r, batches[0].lengths, steps);
  return 0;
}

// The rank process: never returns.
[[noreturn]] void rank_main(int rank, int steps, double bucket_cap_mb, bool cpu_bind, int port_fd, uint16_t port,
                            pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(1);  // the parent died before prctl
  ::setsid();                             // its own autogroup (see the header comment)
  int code = 1;
  try {
    code = run_rank(rank, steps, bucket_cap_mb, cpu_bind, port_fd, port);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember-bench-ddp: rank %d: %s\n", rank, e.what());
  }
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(code);
}

// Reads rank 0's port line within `timeout_ms`; 0 on failure.
uint16_t read_port(int fd, int timeout_ms) {
  std::string line;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (line.find('\n') == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return 0;
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return 0;
    char buf[32];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return 0;  // rank 0 exited (its error is on stderr)
    line.append(buf, static_cast<size_t>(n));
  }
  const long v = std::strtol(line.c_str(), nullptr, 10);
  return v > 0 && v < 65536 ? static_cast<uint16_t>(v) : 0;
}

// Waits for all `pids` until `deadline`; past it kills the ones left. Every child is reaped.
// Returns whether all exited with status 0.
bool reap(std::vector<pid_t> pids, Clock::time_point deadline) {
  bool ok = true;
  while (!pids.empty()) {
    for (auto it = pids.begin(); it != pids.end();) {
      int status = 0;
      const pid_t r = ::waitpid(*it, &status, WNOHANG);
      if (r == *it || (r < 0 && errno == ECHILD)) {
        if (r == *it && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
          if (WIFSIGNALED(status)) {
            std::fprintf(stderr, "ember-bench-ddp: rank process %d killed by signal %d\n", *it, WTERMSIG(status));
          }
          ok = false;
        }
        it = pids.erase(it);
      } else {
        ++it;
      }
    }
    if (pids.empty()) break;
    if (Clock::now() > deadline) {
      std::fprintf(stderr, "ember-bench-ddp: ranks still running at the deadline; killing them\n");
      for (pid_t p : pids) ::kill(p, SIGKILL);
      for (pid_t p : pids) ::waitpid(p, nullptr, 0);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  ember::bench::start_without_flags("ember-bench-ddp",
                                    "DistributedDataParallel scaling over tcp, 1 against 2 ranks, against torch DDP "
                                    "over gloo. Takes no flags: EMBER_BENCH_DDP_STEPS, EMBER_BENCH_DDP_TIMEOUT_S, "
                                    "EMBER_BENCH_DDP_BUCKET_CAP_MB, EMBER_BENCH_DDP_CPU_BIND, "
                                    "EMBER_BENCH_DDP_TORCH_TIMEOUT_S.",
                                    argc, argv);
  int steps = bench::env_int_at_least("EMBER_BENCH_DDP_STEPS", 25, 20);
  int timeout_s = bench::env_int_at_least("EMBER_BENCH_DDP_TIMEOUT_S", 600, 10);
  const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  double bucket_cap_mb = 25.0;  // DistributedDataParallelOptions' (and PyTorch's) default
  if (const char* s = std::getenv("EMBER_BENCH_DDP_BUCKET_CAP_MB")) bucket_cap_mb = std::max(0.01, std::atof(s));
  bool cpu_bind = true;  // as ember-run's default
  if (const char* s = std::getenv("EMBER_BENCH_DDP_CPU_BIND")) cpu_bind = std::string(s) != "none";
  const double load_before = load_avg_1min();
  const pid_t self = ::getpid();

  // No tensor work (no threads) in the parent before the forks.
  int port_pipe[2];
  if (::pipe(port_pipe) != 0) {
    std::fprintf(stderr, "ember-bench-ddp: pipe(): %s\n", std::strerror(errno));
    return 1;
  }
  std::fflush(stdout);
  std::vector<pid_t> pids;
  const pid_t r0 = ::fork();
  if (r0 == 0) {
    ::close(port_pipe[0]);
    rank_main(0, steps, bucket_cap_mb, cpu_bind, port_pipe[1], 0, self);
  }
  ::close(port_pipe[1]);
  if (r0 < 0) {
    std::fprintf(stderr, "ember-bench-ddp: fork(): %s\n", std::strerror(errno));
    return 1;
  }
  pids.push_back(r0);
  const uint16_t port = read_port(port_pipe[0], 60'000);
  ::close(port_pipe[0]);
  if (port == 0) {
    std::fprintf(stderr, "ember-bench-ddp: rank 0 did not report its store port\n");
    reap(pids, Clock::now() + std::chrono::seconds(5));
    return 1;
  }
  const pid_t r1 = ::fork();
  if (r1 == 0) rank_main(1, steps, bucket_cap_mb, cpu_bind, -1, port, self);
  if (r1 > 0) pids.push_back(r1);
  if (r1 < 0) std::fprintf(stderr, "ember-bench-ddp: fork(): %s\n", std::strerror(errno));
  // Without rank 1, rank 0 times out in the rendezvous and exits by itself.
  const bool ok = reap(pids, deadline) && r1 > 0;

  const double load_after = load_avg_1min();
  std::printf("# load average %.2f before, %.2f after, %u cores (the 2r figure wants 2 idle ones)\n", load_before,
              load_after, std::thread::hardware_concurrency());
  std::printf("machine_load_avg %.2f load\n", load_after);
  return ok ? 0 : 1;
}
