// ember-bench-core: figures for ember_core, one `name value unit` line each, medians of
// several repetitions. The allocator fast path against malloc, memory bandwidth (memcpy),
// OpenBLAS sgemm against ember's mm on the same data, and the element-wise add kernel against
// memcpy on one thread. Timings are reported, never asserted (bench/CMakeLists.txt).
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "bench/harness.h"
#include "core/allocator.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

namespace {

using ember::bench::median;


// Keeps the compiler from discarding a value.
template <typename T>
inline void do_not_optimize(const T& value) {
  asm volatile("" : : "r,m"(value) : "memory");
}

// Median over `reps` of the seconds one call of f takes, after `warmup` untimed calls.
double median_seconds(int reps, int warmup, const std::function<void()>& f) {
  return ember::bench::median_ms(warmup, reps, f) / 1e3;
}

// Seconds one call of f takes.
template <typename F>
double seconds(F&& f) {
  return ember::bench::time_ms(std::forward<F>(f)) / 1e3;
}

// Seconds make() takes to return a Tensor; the Tensor is freed after the clock stops.
template <typename Make>
double seconds_to_make(Make&& make) {
  const auto start = ember::bench::Clock::now();
  ember::Tensor out = make();
  do_not_optimize(out.raw_data());
  return std::chrono::duration<double>(ember::bench::Clock::now() - start).count();
}

void report(const char* name, double value, const char* unit) { std::printf("%s %.3f %s\n", name, value, unit); }

constexpr size_t kOneMiB = size_t{1} << 20;

double alloc_free_cached_ns() {
  ember::Allocator* allocator = ember::get_allocator(ember::Device::cpu(0));
  // Short rounds, many of them: the median is a round the scheduler did not interrupt
  // (the build machines are shared), which is the figure we want for the fast path.
  constexpr int kInner = 1000;
  const double s = median_seconds(2001, 50, [&] {
    for (int i = 0; i < kInner; ++i) {
      ember::DataPtr p = allocator->allocate(kOneMiB);
      do_not_optimize(p.get());
    }
  });
  return s / kInner * 1e9;
}

double malloc_free_1mb_ns() {
  constexpr int kInner = 1000;
  const double s = median_seconds(2001, 50, [&] {
    for (int i = 0; i < kInner; ++i) {
      void* p = std::malloc(kOneMiB);
      do_not_optimize(p);
      std::free(p);
    }
  });
  return s / kInner * 1e9;
}

// One 64 MiB memcpy (single thread); returns seconds.
struct MemcpyBench {
  static constexpr size_t kBytes = 64 * kOneMiB;
  std::vector<char> src = std::vector<char>(kBytes, 1), dst = std::vector<char>(kBytes, 0);
  double run_seconds() {
    return seconds([&] {
      std::memcpy(dst.data(), src.data(), kBytes);
      do_not_optimize(dst[kBytes / 2]);
    });
  }
  static double gbps(double seconds) { return 2.0 * static_cast<double>(kBytes) / seconds / 1e9; }  // read + write
};

void fill(float* p, int64_t n, uint32_t seed) {
  uint32_t x = seed;
  for (int64_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    p[i] = static_cast<float>(x >> 8) / static_cast<float>(1u << 24) - 0.5f;
  }
}

}  // namespace

int main(int argc, char** argv) {
  ember::bench::start_without_flags("ember-bench-core",
                                    "ember_core's figures: the allocator fast path against malloc, memcpy bandwidth, "
                                    "sgemm against OpenBLAS, add against memcpy. Takes no flags.",
                                    argc, argv);
  const double alloc_ns = alloc_free_cached_ns();
  report("alloc_free_cached_ns", alloc_ns, "ns");
  report("malloc_free_1mb_ns", malloc_free_1mb_ns(), "ns");

  // sgemm: OpenBLAS directly, then ember's mm, on the same 1024x1024 operands.
  constexpr int64_t n = 1024;
  const double flops = 2.0 * n * n * n;
  ember::Tensor a = ember::empty({n, n});
  ember::Tensor b = ember::empty({n, n});
  ember::Tensor c = ember::empty({n, n});
  fill(a.data_ptr<float>(), n * n, 1);
  fill(b.data_ptr<float>(), n * n, 2);
  // OpenBLAS and ember alternate, so both medians see the same machine load.
  auto blas_once = [&] {
    return seconds([&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data_ptr<float>(), n,
                  b.data_ptr<float>(), n, 0.0f, c.data_ptr<float>(), n);
      do_not_optimize(c.data_ptr<float>()[0]);
    });
  };
  auto ember_once = [&] { return seconds_to_make([&] { return ember::native::mm(a, b); }); };
  for (int i = 0; i < 2; ++i) {
    blas_once();
    ember_once();
  }
  std::vector<double> blas_s, ember_s;
  for (int i = 0; i < 11; ++i) {
    blas_s.push_back(blas_once());
    ember_s.push_back(ember_once());
  }
  const double blas_gflops = flops / median(blas_s) / 1e9;
  const double ember_gflops = flops / median(ember_s) / 1e9;
  report("openblas_sgemm_1024_gflops", blas_gflops, "GFLOP/s");
  report("sgemm_1024_gflops", ember_gflops, "GFLOP/s");
  report("sgemm_ratio_vs_openblas", ember_gflops / blas_gflops, "x");

  // add: 16M floats, a + b -> c on one thread; 3 * 4 bytes per element move.
  ember::set_num_threads(1);
  constexpr int64_t m = int64_t{16} << 20;
  ember::Tensor x = ember::empty({m});
  ember::Tensor y = ember::empty({m});
  fill(x.data_ptr<float>(), m, 3);
  fill(y.data_ptr<float>(), m, 4);
  // memcpy and add alternate, so that both medians see the same machine load (shared hosts).
  MemcpyBench copy;
  auto add_once = [&] { return seconds_to_make([&] { return ember::native::add(x, y); }); };
  for (int i = 0; i < 3; ++i) {
    copy.run_seconds();
    add_once();
  }
  std::vector<double> copy_s, add_s;
  for (int i = 0; i < 21; ++i) {
    copy_s.push_back(copy.run_seconds());
    add_s.push_back(add_once());
  }
  const double memcpy_gbps = MemcpyBench::gbps(median(copy_s));
  const double add_gbps = 3.0 * 4.0 * static_cast<double>(m) / median(add_s) / 1e9;
  report("memcpy_64mb_gbps", memcpy_gbps, "GB/s");
  report("add_f32_16m_gbps", add_gbps, "GB/s");
  report("add_vs_memcpy_ratio", add_gbps / memcpy_gbps, "x");
  return 0;
}
