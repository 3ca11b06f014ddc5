// A worker program for launcher tests (not a test itself): init_process_group(backend from
// argv[1], default "tcp") from the environment ember-run, torchrun or mpirun set, runs the
// quick closed-form table, prints "rank R/N ok" and exits 0, or prints the error and exits 1.
#include <cstdio>
#include <string>

#include "parallel/distributed/init.h"
#include "tests/parallel/process_group_test_util.h"

int main(int argc, char** argv) {
  using namespace ember::parallel;
  const std::string backend = argc > 1 ? argv[1] : "tcp";
  try {
    InitOptions o;
    o.timeout_ms = 60'000;
    auto pg = init_process_group(backend, o);
    const std::string err = test::run_all_checks(*pg, /*quick=*/true);
    if (!err.empty()) {
      std::fprintf(stderr, "rank %d/%d failed: %s\n", pg->rank(), pg->size(), err.c_str());
      return 1;
    }
    pg->barrier()->wait();
    std::printf("rank %d/%d ok\n", pg->rank(), pg->size());
    destroy_process_group();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "process_group_worker: %s\n", e.what());
    return 1;
  }
}
