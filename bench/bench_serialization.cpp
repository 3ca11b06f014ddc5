// ember-bench-serialization: safetensors figures, one `name value unit` line each (medians).
// The load of a header with 200,000 small tensors (an ~11 MB file) shows that header parsing is
// linear; the plain read of the same
// file's bytes in the same run is the floor it compares with. Timings are reported, never
// asserted (bench/CMakeLists.txt).
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "bench/harness.h"
#include "core/cli.h"
#include "core/ops/factory.h"
#include "core/serialization.h"

namespace {

using Clock = std::chrono::steady_clock;

double thread_cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// Median wall-clock milliseconds of f over `reps` calls; *cpu_ms (when given) receives the
// median CPU time of the calling thread (user + system), which a shared machine inflates less.
double median_ms(int reps, const std::function<void()>& f, double* cpu_ms = nullptr) {
  std::vector<double> t, c;
  for (int i = 0; i < reps; ++i) {
    const auto start = Clock::now();
    const double cpu_start = thread_cpu_ms();
    f();
    c.push_back(thread_cpu_ms() - cpu_start);
    t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  std::sort(c.begin(), c.end());
  if (cpu_ms) *cpu_ms = c[c.size() / 2];
  return t[t.size() / 2];
}

void report(const char* name, double value, const char* unit) { std::printf("%s %.3f %s\n", name, value, unit); }

}  // namespace

int main(int argc, char** argv) {
  int64_t n = 200000;  // tensors in the file
  int reps = 3;
  auto app = ember::cli::make_app("ember-bench-serialization",
                                  "safetensors load and save of a file of many small tensors, against a plain read of "
                                  "its bytes.",
                                  "[TENSORS [REPS]]");
  app->add_option("tensors", n, "tensors in the file")->check(ember::cli::at_least(1));
  app->add_option("reps", reps, "timed repetitions of each figure")->check(ember::cli::at_least(1));
  ember::bench::parse_flags(*app, argc, argv);
  ember::bench::start("ember-bench-serialization");
  using namespace ember;
  const char* tmp = std::getenv("TMPDIR");
  const std::string path = std::string(tmp ? tmp : "/tmp") + "/ember-bench-st-" + std::to_string(::getpid()) +
                           ".safetensors";
  std::vector<std::pair<std::string, Tensor>> tensors;
  tensors.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    tensors.emplace_back("layers." + std::to_string(i) + ".weight", full({3}, static_cast<double>(i)));
  }
  const double save_ms = median_ms(reps, [&] { save_safetensors(path, tensors); });
  size_t loaded = 0;
  double load_cpu_ms = 0;
  const double load_ms = median_ms(reps, [&] { loaded = load_safetensors(path).size(); }, &load_cpu_ms);
  double header_cpu_ms = 0;
  const double header_ms =
      median_ms(reps, [&] { loaded = read_safetensors_header(path).entries.size(); }, &header_cpu_ms);
  size_t bytes = 0;
  const double read_ms = median_ms(reps, [&] {
    std::ifstream in(path, std::ios::binary);
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    bytes = all.size();
  });
  std::remove(path.c_str());
  if (loaded != static_cast<size_t>(n)) {
    std::fprintf(stderr, "loaded %zu tensors, expected %lld\n", loaded, static_cast<long long>(n));
    return 1;
  }
  const std::string suffix = n == 200000 ? "200k" : std::to_string(n);
  report(("safetensors_load_" + suffix + "_tensors_ms").c_str(), load_ms, "ms");
  report(("safetensors_load_" + suffix + "_tensors_cpu_ms").c_str(), load_cpu_ms, "ms");
  report(("safetensors_header_" + suffix + "_tensors_ms").c_str(), header_ms, "ms");
  report(("safetensors_header_" + suffix + "_tensors_cpu_ms").c_str(), header_cpu_ms, "ms");
  report(("safetensors_save_" + suffix + "_tensors_ms").c_str(), save_ms, "ms");
  report(("file_read_" + suffix + "_tensors_ms").c_str(), read_ms, "ms");
  report("safetensors_file_MB", static_cast<double>(bytes) / 1e6, "MB");
  return 0;
}
