// main() of an example program: parse the command line (usage and exit code 2 on a mistake,
// the usage on --help), train, and report a failure as "<program>: error: ..." with exit code 1
// (DistributedError and TimeoutError named: under --ddp another rank died or hung, or the
// launcher went away). Header-only.
#pragma once
#include <cstdio>
#include <exception>
#include <string>

#include "core/error.h"

namespace ember_examples {

template <typename Options, typename Parse, typename Usage, typename Train>
int example_main(const char* program, int argc, char** argv, Parse parse, Usage usage, Train train) {
  Options options;
  try {
    options = parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n\n%s", program, e.what(), usage().c_str());
    return 2;
  }
  if (options.help) {
    std::fputs(usage().c_str(), stdout);
    return 0;
  }
  try {
    train(options);
    return 0;
  } catch (const ember::DistributedError& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: error: DistributedError: %s\n", program, e.what());
  } catch (const ember::TimeoutError& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: error: TimeoutError: %s\n", program, e.what());
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: error: %s\n", program, e.what());
  }
  return 1;
}

}  // namespace ember_examples
