// Options of the word_lm example and their command line (CLI11, examples/common/cli.h: --flag
// value or --flag=value; the usage is generated from the flags). Value type.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "examples/common/observe.h"
#include "examples/common/progress.h"
#include "examples/word_lm/bible_data.h"

namespace word_lm {

using ember_examples::ProgressMode;

struct Options {
  std::string data = kDefaultBibleData;
  int64_t vocab_size = 10000;  // <unk>, <eos> and the 9,998 most frequent training words
  std::optional<int64_t> train_tokens;  // use only the first N training tokens (and N/10 of valid/test)
  int64_t emsize = 200;
  int64_t nhid = 200;
  int64_t nlayers = 2;
  double dropout = 0.2;
  bool tied = false;
  double lr = 20.0;
  double clip = 0.25;
  int epochs = 6;
  int64_t batch_size = 20;       // global: the streams of all ranks together
  int64_t eval_batch_size = 10;  // global, like batch_size
  int64_t bptt = 35;
  uint64_t seed = 1111;
  int threads = 0;  // intra-op threads; 0: the cores this process may use / local ranks (at least 1)
  bool ddp = false;
  std::string backend;
  int64_t timeout_s = 300;
  bool resume = false;
  bool deterministic = false;  // the same bits at any world size (Note [word_lm shards] in train.cpp)
  int64_t shards = 4;          // --deterministic: virtual shards (groups of streams) per step
  int64_t max_steps = 0;       // stop after this many training chunks in all (0: none), checkpointing
  bool ft = false;             // --ddp under ember-run --ft: outlive a dead rank (Note [word_lm --ft] in train_ft.cpp)
  bool trace_steps = false;    // --ft: every rank prints its parameters' hash after every committed step
  std::string ft_fault;        // --ft: test-only fault injection (examples/common/ft_job.h)
  std::string metrics_path = "runs/word_lm/metrics.jsonl";
  std::string checkpoint_dir = "runs/word_lm/checkpoints";
  ProgressMode progress = ProgressMode::Auto;
  ember_examples::ObserveFlags observe;  // --tensorboard, --profile, --profile-steps
  bool help = false;
};

/// Parses argv[1..]; --help sets `help` and checks nothing else. Throws ember::ValueError naming the flag for an unknown flag, a missing or
/// malformed value, a value out of range, or a combination that cannot work.
Options parse_options(int argc, const char* const* argv);

/// The --help text, generated from the flags.
std::string usage();

}  // namespace word_lm
