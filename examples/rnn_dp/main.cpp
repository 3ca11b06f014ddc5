// rnn_dp: the PyTorch FAQ's pack -> LSTM -> unpack model under DataParallel, trained to tell
// the language of a word (english, german, french, italian, spanish, dutch). With no flags it
// trains 3 epochs over cpu:0,cpu:1 (or every GPU) with 2 forked DataLoader workers.
// With --ddp, one rank per process under ember-run or mpirun (see --help).
// Exit codes: 0 done, 1 training failed (the message says why), 2 bad command line.
#include <cstdio>
#include <exception>

#include "core/error.h"
#include "examples/rnn_dp/options.h"
#include "examples/rnn_dp/train.h"

int main(int argc, char** argv) {
  rnn_dp::Options options;
  try {
    options = rnn_dp::parse_options(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rnn_dp: %s\n\n%s", e.what(), rnn_dp::usage().c_str());
    return 2;
  }
  if (options.help) {
    std::fputs(rnn_dp::usage().c_str(), stdout);
    return 0;
  }
  try {
    rnn_dp::train(options);
  } catch (const ember::DistributedError& e) {
    // --ddp: another rank died or hung (or the launcher went away).
    std::fflush(stdout);
    std::fprintf(stderr, "rnn_dp: error: DistributedError: %s\n", e.what());
    return 1;
  } catch (const ember::TimeoutError& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "rnn_dp: error: TimeoutError: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "rnn_dp: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
