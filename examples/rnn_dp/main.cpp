// rnn_dp: the PyTorch FAQ's pack -> LSTM -> unpack model under DataParallel, trained to tell
// the language of a word (english, german, french, italian, spanish, dutch). With no flags it
// trains 3 epochs over cpu:0,cpu:1 (or every GPU) with 2 forked DataLoader workers.
// With --ddp, one rank per process under ember-run or mpirun (see --help).
// Exit codes: 0 done, 1 training failed (the message says why), 2 bad command line.
#include "examples/common/example_main.h"
#include "examples/rnn_dp/options.h"
#include "examples/rnn_dp/train.h"

int main(int argc, char** argv) {
  return ember_examples::example_main<rnn_dp::Options>(
      "rnn_dp", argc, argv, rnn_dp::parse_options, rnn_dp::usage,
      [](const rnn_dp::Options& o) { rnn_dp::train(o); });
}
