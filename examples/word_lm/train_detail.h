// What train.cpp and train_ft.cpp (--ft) share: the corpus as token ids, the held-out loss, a
// checkpoint's run identity and paths, and the dropout seed of Note [word_lm shards]. Internal
// to examples/word_lm.
#pragma once
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "examples/word_lm/model.h"
#include "examples/word_lm/options.h"
#include "examples/word_lm/train.h"

namespace word_lm {

/// --ft: the loop of train_ft.cpp (Note [word_lm --ft]); train() calls it.
std::vector<EpochResult> train_ft(const Options& options, std::FILE* out);

namespace detail {

/// The splits of --data (cut to --train-tokens) encoded with the training split's vocabulary of
/// --vocab-size; prints one line about them on `info` (null: silent).
struct Corpus {
  int64_t ntoken = 0;
  std::vector<int64_t> train, valid, test;
};
Corpus load_corpus(const Options& o, std::FILE* info);

/// The model of --emsize, --nhid, --nlayers, --dropout and --tied over `ntoken` words.
ModelConfig model_config(const Options& o, int64_t ntoken);

/// The held-out loss: sum of token losses and token count over the columns of `source`.
std::pair<double, double> evaluate(RNNModel& model, const ember::Tensor& source, int64_t bptt);

/// What a checkpoint must agree on with this run for --resume to continue the same run.
std::map<std::string, std::string> run_identity(const Options& o, int world, int64_t ntoken);
/// "%.17g": a double that reads back as the same bits.
std::string fmt(double v);
/// <dir>/last.safetensors, and its side file of every shard's hidden state.
std::string last_checkpoint_path(const std::string& dir);
std::string hidden_path(const std::string& checkpoint);

/// The default generators' seed for shard `shard`'s forward in chunk `chunk` of epoch `epoch`
/// (Note [word_lm shards]): splitmix64 of the four, so neighbours get unrelated streams.
uint64_t shard_seed(uint64_t seed, int epoch, int64_t chunk, int64_t shard);

}  // namespace detail
}  // namespace word_lm
