// ember-bench-lstm: one training step of Embedding(64, 32) -> LSTM(32, 256, num_layers=2,
// batch_first) over pack_padded_sequence (batch 64, lengths uniform in [10, 50],
// enforce_sorted=false) -> pad_packed_sequence(total_length=50) -> Linear(256, 64) ->
// cross_entropy over the valid positions -> Adam, on 1 and 2 threads; the same model runs in
// PyTorch (bench_lstm_torch.py under /usr/bin/python3, or $EMBER_BENCH_PYTHON; the script is
// $EMBER_BENCH_LSTM_TORCH_SCRIPT when set) in the same run,
// its steps alternating with ember's so both see the same machine load. Prints `name value
// unit` lines: medians over the timed steps after warm-up. Without PyTorch only the ember lines
// are printed (and a `#` line saying why). EMBER_BENCH_LSTM_STEPS sets the timed steps (>= 20).
// The PyTorch child gets OMP_WAIT_POLICY=PASSIVE unless the environment already sets it.
// Then, on one thread: the step's GEMM work in GFLOP/s (lstm_train_gflops_1t) against plain
// OpenBLAS sgemms of the step's own shapes in the same run (sgemm_gflops_1t: every product the
// step makes, step_gemms() below, with nothing else) and their ratio lstm_vs_sgemm_flops_ratio_1t
// (how close the whole step gets to the GEMM limit of its shapes), and the recurrent product (64 x 256 times 256 x 1024,
// the layer's per-step shape) through PackedRhs under each kernel this CPU runs against
// OpenBLAS on the same operands. EMBER_CPU_ISA=avx2 (and OPENBLAS_CORETYPE=Haswell) show what
// an AVX2-only machine gets.
// deterministic_lstm_step_ms_1t: the same step, one thread, in the deterministic mode (Note
// [World-size invariance] in parallel/deterministic_reducer.cpp): use_deterministic_algorithms
// (true) (its GEMM path, Note [Deterministic GEMM]) and the batch as one shard summed exactly by
// a group-less DeterministicReducer; its steps alternate with the default step's
// (lstm_train_step_ms_1t_alternating), and deterministic_lstm_step_vs_default_ratio_1t is the
// median over the pairs of neighbouring steps of their wall-time ratio (goal <= 1.15);
// ..._cpu_ratio_1t the same in process CPU time, which a loaded host disturbs less. The same
// lines with _2shards: the batch as 2 shards of 32, each its own forward and backward, as a job
// that 2 ranks could run (what cutting the batch costs comes on top).
// `--device cuda:N` times the same step on that GPU instead (gpu_lstm_train_step_ms), its GEMM
// GFLOP/s (gpu_lstm_train_gflops) against cuBLAS sgemms of the same shapes in the same run
// (cublas_sgemm_gflops, gpu_lstm_vs_cublas_flops_ratio), and, where the Python's torch has CUDA,
// the same step in PyTorch on that device (torch_gpu_lstm_train_step_ms; gpu_lstm_vs_torch_ratio
// is ember's time over torch's). Without a CUDA device it prints a `#` line and exits 0.
// With cuDNN, also the LSTM alone: ember's forward + backward of the packed 2-layer LSTM
// (gpu_lstm_fwd_bwd_ms, through the cuDNN path) against the same forward and backward (data and
// weights) called directly on cuDNN in the same run (cudnn_reference_step_ms,
// bench/cuda/cudnn_lstm_reference.h), and their ratio gpu_lstm_vs_cudnn_ratio (goal <= 1.1).
#include <signal.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "bench/harness.h"
#include "core/cli.h"
#ifdef EMBER_BENCH_HAVE_CUDNN
#include "bench/cuda/cudnn_lstm_reference.h"
#endif
#include "core/kernels/cpu/isa.h"
#include "core/kernels/cpu/packed_gemm.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"
#include "core/ops/random.h"
#include "core/stream.h"
#include "core/deterministic.h"
#include "core/profiler.h"
#include "core/thread_pool.h"
#include "nn/embedding.h"
#include "nn/functional.h"
#include "nn/linear.h"
#include "nn/optim/adam.h"
#include "nn/rnn.h"
#include "nn/utils/rnn.h"
#include "parallel/deterministic_reducer.h"
#include "tests/support/faq_model.h"

#ifndef EMBER_BENCH_LSTM_TORCH_SCRIPT
#define EMBER_BENCH_LSTM_TORCH_SCRIPT "bench/bench_lstm_torch.py"
#endif

namespace {

using namespace ember;
using namespace ember::bench;  // the harness: Clock, median, TorchPeer, ...

constexpr int64_t kVocab = 64, kEmbed = 32, kHidden = 256, kLayers = 2, kBatch = 64, kSteps = 50;
constexpr int kWarmup = 5;

// The PyTorch side: bench::peer_python() (bench/harness.h) running
// $EMBER_BENCH_LSTM_TORCH_SCRIPT (default: the source tree's bench/bench_lstm_torch.py; a bundle
// made by scripts/gpu_bundle.sh sets it to its own copy).
std::string torch_python() { return bench::peer_python(); }
std::string torch_script() {
  const char* s = std::getenv("EMBER_BENCH_LSTM_TORCH_SCRIPT");
  return s != nullptr ? s : EMBER_BENCH_LSTM_TORCH_SCRIPT;
}

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

struct Model {
  test_support::FaqModel model{kVocab, kEmbed, kHidden, kLayers};
  std::unique_ptr<optim::Adam> opt;
  Tensor tokens, targets;
  std::vector<int64_t> lengths;

  explicit Model(std::vector<int64_t> lens, Device device = Device::cpu()) : lengths(std::move(lens)) {
    model.to(device);
    opt = std::make_unique<optim::Adam>(model.parameters(), optim::AdamOptions(1e-3));
    tokens = randint(0, kVocab, {kBatch, kSteps});
    targets = test_support::ignore_past_lengths(randint(0, kVocab, {kBatch, kSteps}).to_vector<int64_t>(), lengths, kSteps);
    tokens = ember::to(tokens, device);
    targets = ember::to(targets, device);
  }

  void step() { model.step(tokens, lengths, targets, *opt); }

  // The deterministic mode's step over `shards` equal shards of the batch (see the header).
  void deterministic_step(parallel::DeterministicReducer& reducer, int64_t shards) {
    opt->zero_grad();
    const int64_t rows = kBatch / shards;
    for (int64_t s = 0; s < shards; ++s) {
      reducer.set_sync(s + 1 == shards);
      reducer.prepare_for_backward(nullptr);
      const std::vector<int64_t> lens(lengths.begin() + s * rows, lengths.begin() + (s + 1) * rows);
      const int64_t longest = *std::max_element(lens.begin(), lens.end());
      const Tensor t = contiguous(narrow(narrow(tokens, 0, s * rows, rows), 1, 0, longest));
      const Tensor y =
          reshape(contiguous(narrow(narrow(reshape(targets, {kBatch, kSteps}), 0, s * rows, rows), 1, 0, longest)), {-1});
      model.forward_backward(t, lens, y);
    }
    opt->step();
  }
};

// The matrix products of one training step, as (m, n, k) of C[m, n] = A[m, k] B[k, n]: per LSTM
// layer over N packed rows the input product, the recurrent product of each time step (b_t
// active rows), and backward dh per time step, dW_hh, dW_ih and dX over all rows; the decoder's
// product forward and its two backward over all B x T rows. Their flops bound the step.
struct GemmShape {
  int64_t m, n, k;
};
std::vector<GemmShape> step_gemms(const std::vector<int64_t>& lengths) {
  std::vector<int64_t> batch_sizes;
  int64_t rows = 0;
  for (int64_t t = 0; t < kSteps; ++t) {
    const int64_t b = std::count_if(lengths.begin(), lengths.end(), [&](int64_t l) { return l > t; });
    if (b > 0) batch_sizes.push_back(b);
    rows += b;
  }
  const int64_t g = 4 * kHidden;
  std::vector<GemmShape> out;
  for (int64_t layer = 0; layer < kLayers; ++layer) {
    const int64_t f = layer == 0 ? kEmbed : kHidden;
    out.push_back({rows, g, f});                                // X W_ih^T
    for (int64_t b : batch_sizes) out.push_back({b, g, kHidden});  // h_{t-1} W_hh^T
    for (int64_t b : batch_sizes) out.push_back({b, kHidden, g});  // dh_{t-1} = dgates W_hh
    out.push_back({g, kHidden, rows});                          // dW_hh
    out.push_back({g, f, rows});                                // dW_ih
    out.push_back({rows, f, g});                                // dX
  }
  const int64_t bt = kBatch * kSteps;
  out.push_back({bt, kVocab, kHidden});  // decoder forward
  out.push_back({kVocab, kHidden, bt});  // dW
  out.push_back({bt, kHidden, kVocab});  // dX
  return out;
}

double gemm_flops(const std::vector<GemmShape>& shapes) {
  double flops = 0;
  for (const GemmShape& s : shapes) flops += 2.0 * static_cast<double>(s.m) * s.n * s.k;
  return flops;
}

// Operands of every shape on `device` (float32, random), and one pass over them all through
// native::addmm_out: OpenBLAS sgemm on CPU, cuBLAS sgemm on CUDA, nothing else in between.
struct GemmSet {
  std::vector<Tensor> a, b, c;
  GemmSet(const std::vector<GemmShape>& shapes, Device device) {
    for (const GemmShape& s : shapes) {
      a.push_back(randn({s.m, s.k}, TensorOptions().device(device)));
      b.push_back(randn({s.k, s.n}, TensorOptions().device(device)));
      c.push_back(zeros({s.m, s.n}, TensorOptions().device(device)));
    }
  }
  void run() {
    for (size_t i = 0; i < a.size(); ++i) native::addmm_out(c[i], a[i], b[i], 0.0, 1.0);
  }
};

template <typename F>
double median_ms(int reps, const F& f) {
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    f();
    ms.push_back(ms_since(t0));
  }
  return median(ms);
}

void print_gemm_lines(double step_ms, const std::vector<int64_t>& lengths) {
  set_num_threads(1);
  const std::vector<GemmShape> shapes = step_gemms(lengths);
  const double lstm_gflops = gemm_flops(shapes) / (step_ms * 1e6);
  GemmSet gemms(shapes, Device::cpu());
  gemms.run();
  const double sgemm_gflops = gemm_flops(shapes) / (median_ms(5, [&] { gemms.run(); }) * 1e6);
  std::printf("lstm_train_gflops_1t %.1f GFLOP/s\n", lstm_gflops);
  std::printf("sgemm_gflops_1t %.1f GFLOP/s\n", sgemm_gflops);
  std::printf("lstm_vs_sgemm_flops_ratio_1t %.3f ratio\n", lstm_gflops / sgemm_gflops);
  // The recurrent step: h [64 x 256] times W_hh^T [256 x 1024], 200 times per timing.
  const int64_t m = 64, K = kHidden, N = 4 * kHidden, reps = 200;
  Tensor h = randn({m, K}), w_hh = randn({N, K}), c = zeros({m, N});
  Tensor w_t = native::contiguous(native::t(w_hh));
  const double flops = 2.0 * m * K * N * reps;
  const double blas = flops / (median_ms(7, [&] {
                                 for (int64_t i = 0; i < reps; ++i) native::addmm_out(c, h, w_t, 1.0, 1.0);
                               }) * 1e6);
  std::printf("openblas_recurrent_gemm_gflops_1t %.1f GFLOP/s\n", blas);
  using kernels::cpu::CpuIsa;
  for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (isa > kernels::cpu::cpu_isa()) continue;
    kernels::cpu::ScopedCpuIsa scoped(isa);
    if (!kernels::cpu::PackedRhs::available()) continue;
    kernels::cpu::PackedRhs packed(w_hh.data_ptr<float>(), K, N, 1, K);
    const double g = flops / (median_ms(7, [&] {
                                for (int64_t i = 0; i < reps; ++i) {
                                  packed.multiply(m, h.data_ptr<float>(), K, c.data_ptr<float>(), N, true);
                                }
                              }) * 1e6);
    const char* name = kernels::cpu::isa_name(isa);
    std::printf("packed_recurrent_gemm_gflops_1t_%s %.1f GFLOP/s\n", name, g);
    std::printf("packed_recurrent_gemm_%s_vs_openblas_ratio_1t %.3f ratio\n", name, g / blas);
  }
}

// The LSTM alone on the GPU: ember's forward + backward through the cuDNN path against cuDNN
// called directly on the same shapes (see the header comment).
void print_cudnn_lines(Device device, const std::vector<int64_t>& lengths, int steps) {
#ifdef EMBER_BENCH_HAVE_CUDNN
  native::CudnnRnnConfig config;
  config.input_size = kEmbed;
  config.hidden_size = kHidden;
  config.num_layers = kLayers;
  if (!native::cudnn_rnn_usable(config, zeros({1, kEmbed}, TensorOptions().device(device)))) {
    std::printf("# the cuDNN RNN is off (EMBER_CUDNN=0): no gpu_lstm_vs_cudnn_ratio\n");
    return;
  }
  nn::LSTMImpl lstm(nn::LSTMOptions(kEmbed, kHidden).num_layers(kLayers));
  lstm.to(device);
  Tensor x = randn({kBatch, kSteps, kEmbed}, TensorOptions().device(device));
  x.requires_grad_(true);  // as the embedding's output is: cuDNN computes dx either way
  auto packed = nn::utils::rnn::pack_padded_sequence(x, lengths, /*batch_first=*/true, /*enforce_sorted=*/false);
  Tensor g = randn({packed.data.size(0), kHidden}, TensorOptions().device(device));
  auto step = [&] {
    lstm.zero_grad(/*set_to_none=*/true);
    auto [out, state] = lstm.forward(packed);
    autograd::backward({out.data}, {g});
    current_stream(device).synchronize();
  };
  for (int i = 0; i < kWarmup; ++i) step();
  const double ember_ms = median_ms(steps, step);
  std::vector<int> sorted(lengths.begin(), lengths.end());
  std::sort(sorted.begin(), sorted.end(), std::greater<int>());
  std::string error;
  const double ref_ms = bench::cudnn_lstm_reference_ms(device.index, kEmbed, kHidden, kLayers, sorted, steps, &error);
  std::printf("gpu_lstm_fwd_bwd_ms %.3f ms\n", ember_ms);
  if (ref_ms < 0) {
    std::printf("# cuDNN reference failed: %s\n", error.c_str());
    return;
  }
  std::printf("cudnn_reference_step_ms %.3f ms\n", ref_ms);
  std::printf("gpu_lstm_vs_cudnn_ratio %.3f ratio\n", ember_ms / ref_ms);
#else
  (void)device;
  (void)lengths;
  (void)steps;
  std::printf("# ember was built without cuDNN: no cudnn_reference_step_ms\n");
#endif
}

}  // namespace

// The training step on a GPU: gpu_lstm_train_step_ms (median, the stream synchronized per
// step), its GEMM rate against cuBLAS sgemms of the same shapes, and PyTorch's step on the same
// device where its torch has CUDA (its steps alternate with ember's).
int run_on_gpu(Device device, const std::vector<int64_t>& lengths, const std::string& csv, int steps) {
  if (device.index >= cuda_device_count()) {
    std::printf("# skipped: --device %s needs a GPU, and %d CUDA device(s) are visible%s\n", device.str().c_str(),
                cuda_device_count(), cuda_device_count() == 0 ? " (no GPU or no CUDA build)" : "");
    return 0;
  }
  try {
    TorchPeer torch(torch_python(), torch_script(), {csv, device.str()});
    bench::print_peer_version(torch.version(), "torch on " + device.str(), torch.why());
    if (torch.ok()) {
      std::printf("# torch %s on %s\n", torch.version().c_str(), device.str().c_str());
      torch.command("warmup " + std::to_string(kWarmup));
    } else {
      std::printf("# torch with CUDA unavailable (%s %s %s did not start: %s); printing ember numbers only\n",
                  torch_python().c_str(), torch_script().c_str(), device.str().c_str(), torch.why().c_str());
    }
    Model model(lengths, device);
    for (int i = 0; i < kWarmup; ++i) model.step();
    current_stream(device).synchronize();
    std::vector<double> ms, torch_ms;
    for (int i = 0; i < steps; ++i) {
      auto t0 = Clock::now();
      model.step();
      current_stream(device).synchronize();
      ms.push_back(ms_since(t0));
      if (torch.ok()) {
        const std::string r = torch.command("step");
        if (torch.ok()) torch_ms.push_back(std::atof(r.c_str()));
      }
    }
    const double step_ms = median(ms);
    std::printf("gpu_lstm_train_step_ms %.3f ms\n", step_ms);
    const std::vector<GemmShape> shapes = step_gemms(lengths);
    GemmSet gemms(shapes, device);
    gemms.run();
    current_stream(device).synchronize();
    const double cublas_ms = median_ms(9, [&] {
      gemms.run();
      current_stream(device).synchronize();
    });
    const double lstm_gflops = gemm_flops(shapes) / (step_ms * 1e6), cublas_gflops = gemm_flops(shapes) / (cublas_ms * 1e6);
    std::printf("gpu_lstm_train_gflops %.1f GFLOP/s\n", lstm_gflops);
    std::printf("cublas_sgemm_gflops %.1f GFLOP/s\n", cublas_gflops);
    std::printf("gpu_lstm_vs_cublas_flops_ratio %.3f ratio\n", lstm_gflops / cublas_gflops);
    if (!torch_ms.empty()) {
      const double t = median(torch_ms);
      std::printf("torch_gpu_lstm_train_step_ms %.3f ms\n", t);
      std::printf("gpu_lstm_vs_torch_ratio %.3f ratio\n", step_ms / t);
    }
    print_cudnn_lines(device, lengths, steps);
  } catch (const Error& e) {
    std::printf("# gpu step failed on %s: %s\n", device.str().c_str(), e.what());
    return 1;
  }
  return 0;
}

// The same step with ember::profiler recording (every op, autograd node and optimizer update a
// span) against it off, one thread, taking turns so that a loaded host slows both alike:
// profiler_on_step_ratio is median(on) / median(off).
void print_profiler_lines(Model& model, int steps) {
  set_num_threads(1);
  for (int i = 0; i < kWarmup; ++i) model.step();
  std::vector<double> off_ms, on_ms;
  size_t spans = 0;
  for (int i = 0; i < steps; ++i) {
    auto t0 = Clock::now();
    model.step();
    off_ms.push_back(ms_since(t0));
    profiler::start();
    t0 = Clock::now();
    model.step();
    on_ms.push_back(ms_since(t0));
    profiler::stop();
    spans = profiler::events().size();
  }
  std::printf("lstm_train_step_ms_1t_profiler_on %.3f ms\n", median(on_ms));
  std::printf("profiler_spans_per_step %zu spans\n", spans);
  std::printf("profiler_on_step_ratio %.3f ratio\n", median(on_ms) / median(off_ms));
}

int main(int argc, char** argv) {
  std::string device_name = "cpu";
  auto app = ember::cli::make_app("ember-bench-lstm",
                                  "One packed 2-layer LSTM training step against PyTorch's, on 1 and 2 threads "
                                  "(EMBER_BENCH_LSTM_STEPS timed steps, >= 20), or on a GPU against cuDNN.");
  app->add_option("--device", device_name, "cpu, or cuda:N for the GPU path")
      ->check(bench::refused_if_throws([](const std::string& v) { (void)Device(v); }, "cpu|cuda:N"));
  ember::bench::parse_flags(*app, argc, argv);
  ember::bench::start("ember-bench-lstm");
  const Device device(device_name);
  int steps = bench::env_int_at_least("EMBER_BENCH_LSTM_STEPS", 25, 20);
  manual_seed(0);
  // Lengths uniform in [10, 50], shared with the PyTorch side so both do the same work.
  std::vector<int64_t> lengths = randint(10, kSteps + 1, {kBatch}).to_vector<int64_t>();
  std::string csv;
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (i > 0) csv.push_back(',');
    csv.append(std::to_string(lengths[i]));
  }
  if (device.is_cuda()) return run_on_gpu(device, lengths, csv, steps);

  TorchPeer torch(torch_python(), torch_script(), {csv});
  bench::print_peer_version(torch.version(), "torch peer", torch.why());
  if (!torch.ok()) {
    std::printf("# torch unavailable (%s %s did not start: %s); printing ember numbers only\n",
                torch_python().c_str(), torch_script().c_str(), torch.why().c_str());
  } else {
    std::printf("# torch %s\n", torch.version().c_str());
  }

  Model model(lengths);
  double step_ms_1t = 0;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    if (torch.ok()) {
      torch.command("threads " + std::to_string(threads));
      torch.command("warmup " + std::to_string(kWarmup));
    }
    for (int i = 0; i < kWarmup; ++i) model.step();
    std::vector<double> ember_ms, torch_ms;
    for (int i = 0; i < steps; ++i) {
      auto t0 = Clock::now();
      model.step();
      ember_ms.push_back(ms_since(t0));
      if (torch.ok()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let the other side's spinning threads settle
        std::string r = torch.command("step");
        if (torch.ok()) torch_ms.push_back(std::atof(r.c_str()));
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    const double e = median(ember_ms);
    if (threads == 1) step_ms_1t = e;
    std::printf("lstm_train_step_ms_%dt %.3f ms\n", threads, e);
    if (torch.ok() && !torch_ms.empty()) {
      const double t = median(torch_ms);
      std::printf("torch_lstm_train_step_ms_%dt %.3f ms\n", threads, t);
      std::printf("lstm_vs_torch_time_ratio_%dt %.3f ratio\n", threads, e / t);
    }
    std::fflush(stdout);
  }
  {
    // The deterministic mode against the default step, alternating, one thread.
    set_num_threads(1);
    for (const int64_t kShards : {int64_t{1}, int64_t{2}}) {
      const std::string suffix = kShards == 1 ? "" : "_" + std::to_string(kShards) + "shards";
      Model det(lengths);
      std::vector<std::string> names;
      for (size_t i = 0; i < det.model.parameters().size(); ++i) {
        char name[32];
        std::snprintf(name, sizeof name, "parameter %zu", i);
        names.emplace_back(name);
      }
      parallel::DeterministicReducer reducer(det.model.parameters(), names, nullptr,
                                             parallel::DeterministicReducerOptions{.num_shards = kShards});
      std::vector<double> default_ms, det_ms, ratios, cpu_ratios;
      const auto cpu_ms = [] {
        timespec ts{};
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
      };
      for (int i = 0; i < kWarmup + steps; ++i) {
        double d = 0, e = 0, dc = 0, ec = 0;
        auto plain = [&] {
          const double c0 = cpu_ms();
          const auto t0 = Clock::now();
          model.step();
          d = ms_since(t0);
          dc = cpu_ms() - c0;
        };
        auto deterministic = [&] {
          use_deterministic_algorithms(true);
          const double c0 = cpu_ms();
          const auto t0 = Clock::now();
          det.deterministic_step(reducer, kShards);
          e = ms_since(t0);
          ec = cpu_ms() - c0;
          use_deterministic_algorithms(false);
        };
        if (i % 2 == 0) {  // each goes first in every other step
          plain();
          deterministic();
        } else {
          deterministic();
          plain();
        }
        if (i < kWarmup) continue;
        default_ms.push_back(d);
        det_ms.push_back(e);
        ratios.push_back(e / d);
        cpu_ratios.push_back(ec / dc);
      }
      std::printf("lstm_train_step_ms_1t_alternating%s %.3f ms\n", suffix.c_str(), median(default_ms));
      std::printf("deterministic_lstm_step_ms_1t%s %.3f ms\n", suffix.c_str(), median(det_ms));
      std::printf("deterministic_lstm_step_vs_default_ratio_1t%s %.3f ratio\n", suffix.c_str(), median(ratios));
      std::printf("deterministic_lstm_step_vs_default_cpu_ratio_1t%s %.3f ratio\n", suffix.c_str(), median(cpu_ratios));
      std::fflush(stdout);
    }
  }
  print_gemm_lines(step_ms_1t, lengths);
  print_profiler_lines(model, steps);
  return 0;
}
