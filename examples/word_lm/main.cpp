// word_lm: PyTorch's word_language_model on the King James Bible, the PyTorch FAQ's truncated
// backpropagation through time (hidden state detached between chunks). With no flags it trains
// 6 epochs of the 2-layer LSTM (200 units, vocabulary 10,000) on one process; --ddp runs one rank
// per process under ember-run, mpirun or torchrun (see --help).
// Exit codes: 0 done, 1 training failed (the message says why), 2 bad command line.
#include <cstdio>
#include <exception>

#include "core/error.h"
#include "examples/word_lm/options.h"
#include "examples/word_lm/train.h"

int main(int argc, char** argv) {
  word_lm::Options options;
  try {
    options = word_lm::parse_options(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "word_lm: %s\n\n%s", e.what(), word_lm::usage().c_str());
    return 2;
  }
  if (options.help) {
    std::fputs(word_lm::usage().c_str(), stdout);
    return 0;
  }
  try {
    word_lm::train(options);
  } catch (const ember::DistributedError& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "word_lm: error: DistributedError: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "word_lm: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
