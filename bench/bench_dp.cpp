// ember-bench-dp: DataParallel scaling on CPU logical devices. The "nn" issue's LSTM training
// step — Embedding(64, 32) -> LSTM(32, 256, 2 layers, batch_first) over
// pack_padded_sequence(lengths uniform in [10, 50], enforce_sorted=false) ->
// pad_packed_sequence(total_length=50) ->
// Linear(256, 64) -> cross_entropy over the valid positions -> Adam — at batch 128, timed on
// one device (cpu:0) and under DataParallel over cpu:2, cpu:3, with one intra-op thread
// (set_num_threads(1)): every device runs on one core. Each configuration has CPU logical
// devices of its own (the plain copies below: cpu:4 and cpu:5), so each device's caching
// allocator serves one model, as in a training run. (When DataParallel shared cpu:0 and cpu:1
// with the other two models, each model's activations went into blocks another had freed and
// split, and the replica on cpu:0 ran its LSTM backward in 44.0-44.5 ms against 41.2-41.3 ms
// for the plain copy's same half; on devices of its own, 44.9-46.3 against 45.9-46.6.)
// The configurations alternate repetition by repetition so a loaded host slows them alike,
// and in each repetition every configuration steps twice, on two different batches, and only
// its second step is timed: a timed step starts, as a training loop's steps do, after a step
// of the same model rather than of another one (EMBER_BENCH_DP_WARM=0 times one step of each
// per repetition instead, to compare). Medians are printed:
//   dp_step_ms_1dev, dp_step_ms_2dev (ms per step), dp_scaling_2dev (1dev / 2dev, the
//   throughput ratio), and dp_cpu_ms_1dev / dp_cpu_ms_2dev (process CPU time per step, all
//   threads): on a loaded host the wall times mean little, the CPU times still show what
//   DataParallel adds. A `#` line gives the host's load average before and after: the 2dev
//   figure needs two idle cores (with autogroup scheduling a busy host gives this process
//   about one core's share however many threads it runs). Another `#` line splits the 2dev
//   step's CPU time by thread, to show where it goes.
//   dp_plain_concurrent_step_ms_2dev: two threads stepping independent copies of the model (one
//   on cpu:4, one on cpu:5, each with its own Adam) on the two halves of the batch at the same
//   time, the slower thread's time: what DataParallel's step would cost if scatter, replicate,
//   gather and the reduction back were free, on a machine whose two busy cores slow each other.
//   dp_vs_plain_concurrent_2dev = that / dp_step_ms_2dev (goal >= 0.97). It alternates with the
//   other two configurations too. dp_plain_concurrent_cpu_ms_2dev is its process CPU time, and
//   dp_cpu_vs_plain_concurrent_2dev = that / dp_cpu_ms_2dev: the CPU work DataParallel adds,
//   which a loaded host does not blur as it blurs the wall times.
//   dp_step_ms_2dev_deterministic: DataParallel with its deterministic option over cpu:6, cpu:7
//   (num_shards 2: one shard per device, summed exactly; Note [DataParallel shards]), and
//   deterministic_step_vs_default_ratio_2dev = that / dp_step_ms_2dev (goal <= 1.15); it steps
//   after the other two configurations in each repetition (an untimed step, then the timed one).
//   The two 2-device configurations take turns going first (DataParallel in even repetitions,
//   the plain copies in odd ones). EMBER_BENCH_DP_REPS overrides the repetition count (default 30:
//   on this shared 2-core machine medians of 10 moved by 3%).
// --devices cuda:0,cuda:1,... (two or more GPUs) times the same model on GPUs instead: the step
// on the first GPU alone and under DataParallel over the list, at batch EMBER_BENCH_DP_GPU_BATCH
// (default 512, split across the GPUs), alternating, each step ending with every listed device's
// current stream synchronized; prints dp_step_ms_1gpu, dp_step_ms_<n>gpu and dp_scaling_<n>gpu
// (1gpu / <n>gpu, the throughput ratio). With fewer than two GPUs visible, or a listed GPU
// missing, it prints a `#` line saying why and exits 0.
#include <dirent.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/harness.h"
#include "core/cli.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/random.h"
#include "core/stream.h"
#include "core/thread_pool.h"
#include "nn/embedding.h"
#include "nn/functional.h"
#include "nn/linear.h"
#include "nn/optim/adam.h"
#include "nn/rnn.h"
#include "nn/utils/rnn.h"
#include "parallel/data_parallel.h"
#include "bench/tagger_model.h"

namespace {


using namespace ember;

using namespace ember::bench;  // the model (bench/tagger_model.h)
constexpr int64_t kBatch = 128;


struct Batch {
  Tensor tokens, lengths, targets;  // targets: -100 (ignored) past each sequence's end
};

Batch make_batch(uint64_t seed, int64_t batch = kBatch) {
  Generator gen(seed);
  Batch b;
  b.lengths = randint(10, kMaxLen + 1, {batch}, TensorOptions(kInt64), &gen);  // as ember-bench-lstm
  b.tokens = randint(0, kVocab, {batch, kMaxLen}, TensorOptions(kInt64), &gen);
  Tensor targets = randint(0, kVocab, {batch, kMaxLen}, TensorOptions(kInt64), &gen);
  Tensor steps = native::unsqueeze(arange(kMaxLen), 0);
  Tensor pad = native::ge(steps, native::unsqueeze(b.lengths, 1));
  b.targets = native::masked_fill(targets, pad, -100);
  return b;
}

// ---- per-thread CPU time (for the idle-host estimate) --------------------------------------------

/// CPU time of thread `tid` of this process in ms (Linux's per-thread CPU clock, as glibc's
/// pthread_getcpuclockid builds it), or -1 when the thread is gone.
double thread_cpu_ms(pid_t tid) {
  const clockid_t clock = static_cast<clockid_t>((~static_cast<unsigned>(tid) << 3) | 6);  // CPUCLOCK_SCHED, thread
  timespec ts{};
  if (clock_gettime(clock, &ts) != 0) return -1.0;
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

std::map<pid_t, double> all_thread_cpu_ms() {
  std::map<pid_t, double> out;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      pid_t tid = static_cast<pid_t>(std::atoi(e->d_name));
      double ms = thread_cpu_ms(tid);
      if (ms >= 0) out[tid] = ms;
    }
    closedir(d);
  }
  return out;
}

std::string thread_name(pid_t tid) {
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/comm");
  std::string name;
  std::getline(f, name);
  return name;
}

/// CPU ms each thread spent between two snapshots.
std::map<pid_t, double> delta(const std::map<pid_t, double>& before, const std::map<pid_t, double>& after) {
  std::map<pid_t, double> out;
  for (const auto& [tid, ms] : after) {
    auto it = before.find(tid);
    out[tid] = ms - (it == before.end() ? 0.0 : it->second);
  }
  return out;
}

template <class Forward>
StepTime step_ms(Forward&& forward, optim::Adam& adam, const Batch& b, const std::vector<Device>& sync = {}) {
  double c0 = process_cpu_ms();
  auto t0 = std::chrono::steady_clock::now();
  adam.zero_grad();
  Tensor logits = forward(b.tokens, b.lengths);
  Tensor loss = nn::functional::cross_entropy(reshape(logits, {-1, kVocab}), native::reshape(b.targets, {-1}));
  loss.backward();
  adam.step();
  for (const Device& d : sync) current_stream(d).synchronize();  // GPU work is done when the clock stops
  auto t1 = std::chrono::steady_clock::now();
  return {std::chrono::duration<double, std::milli>(t1 - t0).count(), process_cpu_ms() - c0};
}

// --devices cuda:...: the step on devices[0] alone vs under DataParallel over `devices`.
int run_gpus(const std::vector<Device>& devices, int reps) {
  const int visible = cuda_device_count();
  if (devices.size() < 2 || visible < 2) {
    std::printf("# dp_scaling skipped: DataParallel scaling needs two or more GPUs (%zu listed, %d visible)\n",
                devices.size(), visible);
    return 0;
  }
  for (const Device& d : devices) {
    if (d.index >= visible) {
      std::printf("# dp_scaling skipped: %s is not visible (%d GPUs)\n", d.str().c_str(), visible);
      return 0;
    }
  }
  int64_t batch = 512;
  if (const char* b = std::getenv("EMBER_BENCH_DP_GPU_BATCH")) batch = std::max<int64_t>(2, std::atoll(b));
  const std::string n = std::to_string(devices.size()) + "gpu";
  manual_seed(0);
  auto single = std::make_shared<TaggerModel>();
  single->to(devices[0]);
  auto wrapped = single->clone_as();
  parallel::DataParallel<TaggerModel> dp(wrapped, devices);
  optim::Adam adam1(single->parameters(), optim::AdamOptions(1e-3));
  optim::Adam adam2(dp.parameters(), optim::AdamOptions(1e-3));
  auto one = [&](const Tensor& t, const Tensor& l) { return single->forward(t, l); };
  auto many = [&](const Tensor& t, const Tensor& l) { return dp(t, l); };
  std::vector<Batch> batches;
  for (int i = 0; i < 4; ++i) {
    Batch b = make_batch(1000 + static_cast<uint64_t>(i), batch);
    b.tokens = to(b.tokens, devices[0]);  // DataParallel scatters from the first GPU; lengths stay on the host
    b.targets = to(b.targets, devices[0]);
    batches.push_back(std::move(b));
  }
  for (int w = 0; w < 3; ++w) {  // warm up: allocator caches, cuBLAS handles, NCCL communicators
    step_ms(one, adam1, batches[static_cast<size_t>(w) % batches.size()], devices);
    step_ms(many, adam2, batches[static_cast<size_t>(w) % batches.size()], devices);
  }
  std::vector<double> t1, tn;
  for (int r = 0; r < reps; ++r) {
    const Batch& b = batches[static_cast<size_t>(r) % batches.size()];
    t1.push_back(step_ms(one, adam1, b, devices).wall_ms);
    tn.push_back(step_ms(many, adam2, b, devices).wall_ms);
  }
  const double m1 = median(t1), mn = median(tn);
  std::printf("# batch %lld over %s\n", static_cast<long long>(batch), n.c_str());
  std::printf("dp_step_ms_1gpu %.2f ms\n", m1);
  std::printf("dp_step_ms_%s %.2f ms\n", n.c_str(), mn);
  std::printf("dp_scaling_%s %.3f x\n", n.c_str(), mn > 0 ? m1 / mn : 0.0);
  return 0;
}

// The CUDA devices of a --devices list ("cuda:0,cuda:1"); throws ValueError naming a bad entry.
std::vector<Device> cuda_devices(const std::string& list) {
  std::vector<Device> devices;
  for (size_t start = 0; start <= list.size();) {
    const size_t comma = std::min(list.find(',', start), list.size());
    devices.emplace_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  for (const Device& d : devices)
    if (!d.is_cuda())
      EMBER_THROW(ValueError, "expected CUDA devices (cuda:0,cuda:1,...), got ", d.str(),
                  "; without --devices the benchmark runs on CPU logical devices");
  return devices;
}

}  // namespace

int main(int argc, char** argv) {
  std::string devices;
  auto app = ember::cli::make_app("ember-bench-dp",
                                  "DataParallel scaling of the LSTM tagger step: one device against two CPU logical "
                                  "devices, one thread each, or over the GPUs given.");
  app->add_option("--devices", devices, "CUDA devices to run over instead (cuda:0,cuda:1,...)")
      ->check(ember::bench::refused_if_throws([](const std::string& v) { cuda_devices(v); }, "cuda:N,..."));
  ember::bench::parse_flags(*app, argc, argv);
  ember::bench::start("ember-bench-dp");
  const std::vector<Device> gpu_devices = devices.empty() ? std::vector<Device>{} : cuda_devices(devices);
  set_num_threads(1);
  const double load_before = load_average_1min();
  int reps = ember::bench::env_int_at_least("EMBER_BENCH_DP_REPS", 30, 1);
  if (!gpu_devices.empty()) return run_gpus(gpu_devices, reps);

  manual_seed(0);
  auto single = std::make_shared<TaggerModel>();
  const Device dp0 = Device::cpu(2), dp1 = Device::cpu(3), plain0 = Device::cpu(4), plain1 = Device::cpu(5);
  auto wrapped = single->clone_as(dp0);
  parallel::DataParallel<TaggerModel> dp(wrapped, {dp0, dp1});
  optim::Adam adam1(single->parameters(), optim::AdamOptions(1e-3));
  optim::Adam adam2(dp.parameters(), optim::AdamOptions(1e-3));
  auto one = [&](const Tensor& t, const Tensor& l) { return single->forward(t, l); };
  auto two = [&](const Tensor& t, const Tensor& l) { return dp(t, l); };
  const Device det0 = Device::cpu(6), det1 = Device::cpu(7);
  parallel::DataParallelOptions deto;
  deto.devices = std::vector<Device>{det0, det1};
  deto.deterministic = true;
  deto.num_shards = 2;
  parallel::DataParallel<TaggerModel> dp_det(single->clone_as(det0), deto);
  optim::Adam adam_det(dp_det.parameters(), optim::AdamOptions(1e-3));
  auto two_det = [&](const Tensor& t, const Tensor& l) { return dp_det(t, l); };

  std::vector<Batch> batches;
  for (int i = 0; i < 4; ++i) batches.push_back(make_batch(1000 + i));
  std::vector<Batch> dp_batches;  // the same batches on dp0 (lengths stay on the host)
  for (const Batch& b : batches) dp_batches.push_back({to(b.tokens, dp0), b.lengths, to(b.targets, dp0)});
  std::vector<Batch> det_batches;  // on det0
  for (const Batch& b : batches) det_batches.push_back({to(b.tokens, det0), b.lengths, to(b.targets, det0)});

  // Two independent copies, one per device, each stepping its half of the batch on its own
  // thread (this one for plain0, `helper` for plain1), started together by `go`.
  auto copy0 = single->clone_as();
  auto copy1 = single->clone_as();
  copy0->to(plain0);
  copy1->to(plain1);
  optim::Adam adam_c0(copy0->parameters(), optim::AdamOptions(1e-3));
  optim::Adam adam_c1(copy1->parameters(), optim::AdamOptions(1e-3));
  auto half = [&](const Batch& b, int64_t which, Device d) {
    const int64_t n = kBatch / 2;
    Batch h;
    h.tokens = to(native::narrow(b.tokens, 0, which * n, n), d);
    h.lengths = native::contiguous(native::narrow(b.lengths, 0, which * n, n));  // lengths stay on the host
    h.targets = to(native::narrow(b.targets, 0, which * n, n), d);
    return h;
  };
  std::vector<Batch> halves0, halves1;
  for (const Batch& b : batches) {
    halves0.push_back(half(b, 0, plain0));
    halves1.push_back(half(b, 1, plain1));
  }
  auto c0 = [&](const Tensor& t, const Tensor& l) { return copy0->forward(t, l); };
  auto c1 = [&](const Tensor& t, const Tensor& l) { return copy1->forward(t, l); };
  std::barrier go(2), done(2);
  bool stop = false;    // written before `go` by this thread, read after it by the helper
  size_t helper_batch = 0;
  double helper_ms = 0;  // written by the helper before `done`, read after it here
  std::thread helper([&] {
    for (;;) {
      go.arrive_and_wait();
      if (stop) return;
      helper_ms = step_ms(c1, adam_c1, halves1[helper_batch]).wall_ms;
      done.arrive_and_wait();
    }
  });
  auto concurrent_step = [&](size_t k) {
    helper_batch = k;
    const double cpu0 = process_cpu_ms();
    go.arrive_and_wait();
    const double mine = step_ms(c0, adam_c0, halves0[k]).wall_ms;
    done.arrive_and_wait();
    return StepTime{std::max(mine, helper_ms), process_cpu_ms() - cpu0};
  };
  for (int w = 0; w < 2; ++w) {  // warm up: allocator caches, device threads
    step_ms(one, adam1, batches[w]);
    step_ms(two, adam2, dp_batches[w]);
    step_ms(two_det, adam_det, det_batches[w]);
    concurrent_step(static_cast<size_t>(w));
  }
  const pid_t main_tid = static_cast<pid_t>(syscall(SYS_gettid));
  std::vector<double> t4;  // the deterministic DataParallel
  StepTimes st1, st2, st3;
  std::vector<double> main2, fwd2_0, fwd2_1, other2;
  const char* warm_env = std::getenv("EMBER_BENCH_DP_WARM");
  const bool warm = warm_env == nullptr || std::string(warm_env) != "0";
  for (int r = 0; r < reps; ++r) {
    const size_t k = static_cast<size_t>(r) % batches.size();
    const size_t before = (k + batches.size() - 1) % batches.size();  // the untimed step's batch
    const Batch& b = batches[k];
    if (warm) step_ms(one, adam1, batches[before]);
    StepTime s1 = step_ms(one, adam1, b);
    auto run_dp = [&](std::map<pid_t, double>& a1, std::map<pid_t, double>& a2) {
      if (warm) step_ms(two, adam2, dp_batches[before]);
      a1 = all_thread_cpu_ms();
      StepTime s = step_ms(two, adam2, dp_batches[k]);
      a2 = all_thread_cpu_ms();
      return s;
    };
    auto run_plain = [&] {
      if (warm) concurrent_step(before);
      return concurrent_step(k);
    };
    std::map<pid_t, double> a1, a2;
    StepTime s2, s3;
    if (r % 2 == 0) {
      s2 = run_dp(a1, a2);
      s3 = run_plain();
    } else {
      s3 = run_plain();
      s2 = run_dp(a1, a2);
    }
    if (warm) step_ms(two_det, adam_det, det_batches[before]);
    t4.push_back(step_ms(two_det, adam_det, det_batches[k]).wall_ms);
    st3.add(s3);
    st1.add(s1);
    st2.add(s2);
    // Where the 2dev step's CPU time went, per thread: the replicas' forwards run on the
    // DataParallel threads "dp-cpu:2" and "dp-cpu:3"; in backward the calling thread runs
    // cpu:2's nodes itself (Note [Engine threads]) and cpu:3's engine worker the rest.
    double main_ms = 0, fwd0 = 0, fwd1 = 0, other = 0;
    for (const auto& [tid, ms] : delta(a1, a2)) {
      const std::string name = tid == main_tid ? "" : thread_name(tid);
      if (tid == main_tid) {
        main_ms += ms;
      } else if (name == "dp-cpu:2") {
        fwd0 += ms;
      } else if (name == "dp-cpu:3") {
        fwd1 += ms;
      } else {
        other += ms;
      }
    }
    main2.push_back(main_ms);
    fwd2_0.push_back(fwd0);
    fwd2_1.push_back(fwd1);
    other2.push_back(other);
  }
  stop = true;
  go.arrive_and_wait();
  helper.join();
  double m1 = median(st1.wall), m2 = median(st2.wall), m3 = median(st3.wall);
  std::printf("# load average %.2f before, %.2f after (2 cores wanted idle); %d repetitions, %s\n", load_before,
              load_average_1min(), reps,
              warm ? "each timed step after an untimed step of the same configuration"
                   : "one step of each configuration per repetition (EMBER_BENCH_DP_WARM=0)");
  std::printf("dp_step_ms_1dev %.2f ms\n", m1);
  std::printf("dp_step_ms_2dev %.2f ms\n", m2);
  std::printf("dp_scaling_2dev %.3f x\n", m1 / m2);
  std::printf("dp_cpu_ms_1dev %.2f ms\n", median(st1.cpu));
  std::printf("dp_cpu_ms_2dev %.2f ms\n", median(st2.cpu));
  std::printf("dp_plain_concurrent_step_ms_2dev %.2f ms\n", m3);
  std::printf("dp_vs_plain_concurrent_2dev %.3f ratio\n", m2 > 0 ? m3 / m2 : 0.0);
  std::printf("dp_plain_concurrent_cpu_ms_2dev %.2f ms\n", median(st3.cpu));
  std::printf("dp_cpu_vs_plain_concurrent_2dev %.3f ratio\n", median(st2.cpu) > 0 ? median(st3.cpu) / median(st2.cpu) : 0.0);
  std::printf("dp_step_ms_2dev_deterministic %.2f ms\n", median(t4));
  std::printf("deterministic_step_vs_default_ratio_2dev %.3f ratio\n", m2 > 0 ? median(t4) / m2 : 0.0);
  std::printf(
      "# 2dev CPU ms per step by thread (medians): caller %.2f (scatter, gather, loss, cpu:2's backward, Adam), "
      "dp-cpu:2 %.2f and dp-cpu:3 %.2f (replica forwards), other threads %.2f (cpu:3's backward)\n",
      median(main2), median(fwd2_0), median(fwd2_1), median(other2));
  return 0;
}
