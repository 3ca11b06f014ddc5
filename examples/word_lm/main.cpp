// word_lm: PyTorch's word_language_model on the King James Bible, the PyTorch FAQ's truncated
// backpropagation through time (hidden state detached between chunks). With no flags it trains
// 6 epochs of the 2-layer LSTM (200 units, vocabulary 10,000) on one process; --ddp runs one rank
// per process under ember-run, mpirun or torchrun (see --help).
// Exit codes: 0 done, 1 training failed (the message says why), 2 bad command line.
#include "examples/common/example_main.h"
#include "examples/word_lm/options.h"
#include "examples/word_lm/train.h"

int main(int argc, char** argv) {
  return ember_examples::example_main<word_lm::Options>(
      "word_lm", argc, argv, word_lm::parse_options, word_lm::usage,
      [](const word_lm::Options& o) { word_lm::train(o); });
}
