#include "examples/word_lm/train.h"

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "autograd/ops.h"
#include "core/allocator.h"
#include "core/cpu_affinity.h"
#include "core/deterministic.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/ops/random.h"
#include "core/serialization.h"
#include "core/thread_pool.h"
#include "examples/common/distributed_job.h"
#include "examples/common/observe.h"
#include "examples/common/progress.h"
#include "examples/word_lm/bible_data.h"
#include "examples/word_lm/corpus.h"
#include "examples/word_lm/train_detail.h"
#include "nn/checkpoint.h"
#include "nn/functional.h"
#include "nn/optim/sgd.h"
#include "nn/utils/clip_grad.h"
#include "parallel/deterministic_reducer.h"
#include "parallel/distributed_data_parallel.h"

namespace word_lm {

// Note [word_lm runs]
// A run is a function of its options (and of the thread count, which changes float rounding):
//  - initialization draws from ember's default generators seeded with --seed;
//  - before epoch e, the default generators are seeded with epoch_seed(seed, e) + rank, so the
//    dropout masks of epoch e depend on (seed, e, rank) only, not on what earlier epochs drew;
//  - the learning rate starts at --lr and is divided by 4 after each epoch whose validation
//    loss is not below the best so far (PyTorch's example);
//  - the checkpoint written after each epoch holds the model, the optimizer, the epoch, the
//    learning rate for the next epoch and the best validation loss, so --resume starts epoch
//    e + 1 in exactly the state an uninterrupted run has there (the tests compare the bytes).
// The hidden state starts at zeros each epoch and each evaluation.

// Note [Memory per chunk]
// Truncated BPTT keeps memory flat: after chunk i's backward nothing refers to its graph (the
// state handed to chunk i + 1 is detached, the loss is added up as a number), so the graph's
// nodes (host heap) and the activations they saved (allocator) are freed. With the FAQ's
// `total_loss += loss` (LossTally::kKeepHistory) the running sum's history reaches every chunk's
// graph, so the nodes stay alive until the sum is dropped: the heap grows by one graph per
// chunk (about 10 KB for the test's small model). The activations do not: backward releases
// the tensors a node saved (as PyTorch does), so allocator statistics alone stay flat here and
// memory_per_chunk reports both.

// Note [word_lm under DDP]
// With --ddp each process is one rank. The token stream is cut into --batch-size contiguous
// columns (batchify) as in one process, and rank r of W trains on columns [r * B / W,
// (r + 1) * B / W): its chunk i holds exactly those columns of the one-process chunk i. Every
// rank's chunk loss is the mean over the same number of tokens, so DistributedDataParallel's
// average of the ranks' gradients is the one-process gradient, and clip_grad_norm_ then sees
// the same norm: with --dropout 0 a run over W ranks follows the one-process run up to float
// rounding (with dropout the masks differ: each rank draws its own). Validation and test
// columns are split the same way and the token losses summed over ranks. Rank 0 alone prints,
// writes metrics and checkpoints; every rank waits at a barrier until the epoch's checkpoint is
// on disk. --resume: every rank loads it.

// Note [word_lm shards]
// --deterministic gives the same bits (model and optimizer state) after every step for 1
// process or any number of ranks, any thread count, and across a resume on another number of
// ranks (Note [World-size invariance] in parallel/deterministic_reducer.cpp):
//  - the --batch-size streams (batchify's columns) are cut into --shards shards of equal
//    width; rank r of W holds shards [r*S/W, (r+1)*S/W), so its columns are contiguous, and each
//    shard carries its own hidden state from chunk to chunk;
//  - each chunk runs every held shard as its own forward and backward (all but the rank's last
//    under no_sync()); DistributedDataParallel's deterministic option (without --ddp a group-less
//    DeterministicReducer) writes the exact mean of all shards' gradients, which equals the
//    gradient of the chunk's mean token loss (equal shards); clip_grad_norm_ and SGD then run on
//    the same bits everywhere;
//  - dropout draws from the default generators seeded with (seed, epoch, chunk, shard) before the
//    shard's forward, so its masks do not depend on the rank that runs it;
//  - validation and test run on every rank over all streams (no sum over ranks), so the
//    annealing decision is the same too;
//  - --max-steps stops after a chunk with a checkpoint whose side file <checkpoint>.hidden holds
//    every shard's hidden state ([2, nlayers, batch, nhid]: h and c); --resume on any number of
//    ranks goes on from that chunk with those states.

namespace detail {

using ember::Tensor;
using ember_examples::say;

std::string fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

Corpus load_corpus(const Options& o, std::FILE* info) {
  CorpusSplits splits = split_by_chapter(read_bible_text(o.data));
  if (o.train_tokens) {
    const auto eval_tokens = static_cast<size_t>(std::max<int64_t>(*o.train_tokens / 10, 2 * o.eval_batch_size));
    splits.train.resize(std::min(splits.train.size(), static_cast<size_t>(*o.train_tokens)));
    splits.valid.resize(std::min(splits.valid.size(), eval_tokens));
    splits.test.resize(std::min(splits.test.size(), eval_tokens));
  }
  const Vocabulary vocab(splits.train, o.vocab_size);
  Corpus c;
  c.ntoken = vocab.size();
  c.train = vocab.encode(splits.train);
  c.valid = vocab.encode(splits.valid);
  c.test = vocab.encode(splits.test);
  const int64_t unk = std::count(c.train.begin(), c.train.end(), int64_t{0});
  say(info,
      "word_lm: corpus %s: %lld chapters, %lld verses; tokens train=%zu valid=%zu test=%zu%s; vocabulary %lld "
      "(%.2f%% of training tokens are <unk>)\n",
      o.data.c_str(), static_cast<long long>(splits.chapters), static_cast<long long>(splits.verses),
      c.train.size(), c.valid.size(), c.test.size(), o.train_tokens ? " (--train-tokens)" : "",
      static_cast<long long>(c.ntoken), c.train.empty() ? 0.0 : 100.0 * static_cast<double>(unk) / c.train.size());
  return c;
}

std::pair<double, double> evaluate(RNNModel& model, const Tensor& source, int64_t bptt) {
  ember::NoGradGuard no_grad;
  model.eval();
  RNNModel::State hidden = model.init_hidden(source.size(1));
  double sum = 0.0, count = 0.0;
  for (int64_t i = 0; i + 1 < source.size(0); i += bptt) {
    const int64_t len = std::min(bptt, source.size(0) - 1 - i);
    const Tensor input = ember::narrow(source, 0, i, len);
    const Tensor targets = ember::reshape(ember::narrow(source, 0, i + 1, len), {-1});
    auto [logits, next] = model.forward(input, hidden);
    hidden = next;
    const double n = static_cast<double>(targets.numel());
    sum += ember::nn::F::cross_entropy(logits, targets).item() * n;
    count += n;
  }
  return {sum, count};
}

std::map<std::string, std::string> run_identity(const Options& o, int world, int64_t ntoken) {
  return {{"seed", std::to_string(o.seed)},
          {"ddp_world_size", o.deterministic ? "any" : o.ddp ? std::to_string(world) : "none"},
          {"deterministic_shards", o.deterministic ? std::to_string(o.shards) : "none"},
          {"batch_size", std::to_string(o.batch_size)},
          {"bptt", std::to_string(o.bptt)},
          {"ntoken", std::to_string(ntoken)},
          {"train_tokens", o.train_tokens ? std::to_string(*o.train_tokens) : "all"},
          {"dropout", fmt(o.dropout)},
          {"clip", fmt(o.clip)},
          {"tied", o.tied ? "true" : "false"}};
}

ModelConfig model_config(const Options& o, int64_t ntoken) {
  return {.ntoken = ntoken, .ninp = o.emsize, .nhid = o.nhid, .nlayers = o.nlayers, .dropout = o.dropout, .tied = o.tied};
}

std::string last_checkpoint_path(const std::string& dir) { return dir + "/last.safetensors"; }
std::string hidden_path(const std::string& checkpoint) { return checkpoint + ".hidden"; }

uint64_t shard_seed(uint64_t seed, int epoch, int64_t chunk, int64_t shard) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(epoch) * 0xBF58476D1CE4E5B9ull +
               static_cast<uint64_t>(chunk) * 0x94D049BB133111EBull + static_cast<uint64_t>(shard) + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace detail

namespace {

using Clock = std::chrono::steady_clock;
using ember::Tensor;
using detail::evaluate;
using detail::fmt;
using detail::hidden_path;
using detail::last_checkpoint_path;
using detail::shard_seed;
using ember_examples::DistributedJob;
using ember_examples::say;

struct RunState {
  int epochs_done = 0;
  double lr = 0.0;
  double best_val = std::numeric_limits<double>::infinity();
  int64_t step = 0;           // training chunks run in all
  int64_t chunks_done = 0;    // of epoch epochs_done + 1, by a --max-steps checkpoint
  double loss_sum = 0.0, loss_count = 0.0;  // that epoch's shard losses so far, over all ranks
};

RunState resume_from(const Options& o, const DistributedJob& job, RNNModel& model, ember::optim::Optimizer& optimizer,
                     int64_t ntoken, std::FILE* info) {
  RunState s;
  s.lr = o.lr;
  const std::string path = last_checkpoint_path(o.checkpoint_dir);
  if (!std::filesystem::exists(path)) {
    say(info, "word_lm: --resume: no checkpoint at %s, starting from epoch 1\n", path.c_str());
    return s;
  }
  // The run's identity first, from the header alone: a checkpoint of another configuration is
  // named as such, not reported as a shape or optimizer mismatch.
  std::map<std::string, std::string> extra;
  for (const auto& [key, value] : ember::read_safetensors_header(path).metadata) {
    if (key.rfind("extra.", 0) == 0) extra[key.substr(6)] = value;
  }
  for (const auto& [key, value] : detail::run_identity(o, job.world, ntoken)) {
    auto it = extra.find(key);
    EMBER_CHECK_T(ember::ValueError, it != extra.end() && it->second == value, "--resume: ", path,
                  " was written by a run with ", key, "=", it == extra.end() ? "<absent>" : it->second,
                  " but this run has ", key, "=", value, "; resume with the same options or remove the checkpoint");
  }
  ember::nn::load_checkpoint(path, model, &optimizer, &extra);
  for (const char* key : {"epoch", "next_lr", "best_val_loss"}) {
    EMBER_CHECK_T(ember::ValueError, extra.count(key), "--resume: ", path, " has no ", key, " entry");
  }
  s.epochs_done = std::stoi(extra["epoch"]);
  s.lr = std::stod(extra["next_lr"]);
  s.best_val = std::stod(extra["best_val_loss"]);
  if (extra.count("step")) s.step = std::stoll(extra["step"]);
  if (extra.count("chunks_done")) {
    s.chunks_done = std::stoll(extra["chunks_done"]);
    s.loss_sum = std::stod(extra["train_loss_sum"]);
    s.loss_count = std::stod(extra["train_loss_count"]);
  }
  say(info, "word_lm: resumed from %s (epoch %d done, next lr %g)\n", path.c_str(), s.epochs_done, s.lr);
  if (s.chunks_done > 0) {
    say(info, "word_lm: resuming at chunk %lld of epoch %d (step %lld)\n", static_cast<long long>(s.chunks_done),
        s.epochs_done + 1, static_cast<long long>(s.step));
  }
  return s;
}

void save_epoch(const Options& o, const DistributedJob& job, const RNNModel& model,
                const ember::optim::Optimizer& optimizer, int64_t ntoken, const EpochResult& r, const RunState& s,
                bool best) {
  std::filesystem::create_directories(o.checkpoint_dir);
  auto extra = detail::run_identity(o, job.world, ntoken);
  extra["epoch"] = std::to_string(r.epoch);
  extra["next_lr"] = fmt(s.lr);
  extra["best_val_loss"] = fmt(s.best_val);
  extra["val_loss"] = fmt(r.val_loss);
  extra["test_loss"] = fmt(r.test_loss);
  extra["step"] = std::to_string(s.step);
  const std::string dir = o.checkpoint_dir;
  ember::nn::save_checkpoint(dir + "/epoch-" + std::to_string(r.epoch) + ".safetensors", model, &optimizer, extra);
  if (best) ember::nn::save_checkpoint(dir + "/best.safetensors", model, &optimizer, extra);
  ember::nn::save_checkpoint(last_checkpoint_path(dir), model, &optimizer, extra);
}

void append_metrics(const Options& o, const DistributedJob& job, const EpochResult& r, double next_lr, int threads,
                    double eval_s, const std::vector<int64_t>& split_tokens, int64_t ntoken) {
  const nlohmann::json j = {
      {"epoch", r.epoch},
      {"lr", r.lr},
      {"next_lr", next_lr},
      {"train_loss", r.train_loss},
      {"train_ppl", std::exp(r.train_loss)},
      {"val_loss", r.val_loss},
      {"val_ppl", std::exp(r.val_loss)},
      {"test_loss", r.test_loss},
      {"test_ppl", std::exp(r.test_loss)},
      {"epoch_s", r.epoch_s},
      {"tokens_per_s", r.tokens_per_s},
      {"eval_s", eval_s},
      {"train_tokens", split_tokens[0]},
      {"valid_tokens", split_tokens[1]},
      {"test_tokens", split_tokens[2]},
      {"vocab_size", ntoken},
      {"emsize", o.emsize},
      {"nhid", o.nhid},
      {"nlayers", o.nlayers},
      {"dropout", o.dropout},
      {"tied", o.tied},
      {"batch_size", o.batch_size},
      {"bptt", o.bptt},
      {"clip", o.clip},
      {"seed", o.seed},
      {"ddp_world_size", o.ddp ? job.world : 0},
      {"threads", threads},
      {"time", ember_examples::unix_time_s()}};
  ember_examples::append_metrics_line(o.metrics_path, j.dump());
}

}  // namespace

// ---- TruncatedBptt ----------------------------------------------------------------------------

TruncatedBptt::TruncatedBptt(Forward forward, std::vector<Tensor> parameters, ember::optim::Optimizer& optimizer,
                             double clip, int64_t bptt, LossTally tally)
    : forward_(std::move(forward)),
      parameters_(std::move(parameters)),
      optimizer_(optimizer),
      clip_(clip),
      bptt_(bptt),
      tally_(tally) {}

int64_t TruncatedBptt::num_chunks(const Tensor& source) const { return (source.size(0) - 1 + bptt_ - 1) / bptt_; }

double TruncatedBptt::step(const Tensor& source, int64_t chunk) {
  const int64_t i = chunk * bptt_;
  const int64_t len = std::min(bptt_, source.size(0) - 1 - i);
  EMBER_CHECK_T(ember::IndexError, chunk >= 0 && len > 0, "TruncatedBptt: chunk ", chunk, " of a source of ",
                source.size(0), " rows (", num_chunks(source), " chunks of ", bptt_, ")");
  const Tensor input = ember::narrow(source, 0, i, len);
  const Tensor targets = ember::reshape(ember::narrow(source, 0, i + 1, len), {-1});
  // Detach, or backward would run on into the previous chunk's (already freed) graph.
  hidden_ = repackage_hidden(hidden_);
  optimizer_.zero_grad();
  auto [logits, next] = forward_(input, hidden_);
  hidden_ = next;
  const Tensor loss = ember::nn::F::cross_entropy(logits, targets);
  loss.backward();
  grad_norm_ = ember::nn::utils::clip_grad_norm_(parameters_, clip_);
  optimizer_.step();
  const double value = loss.item();
  if (tally_ == LossTally::kItem) {
    total_ += value;
  } else {
    history_total_ = history_total_.defined() ? ember::add(history_total_, loss) : loss;
  }
  return value;
}

double TruncatedBptt::total_loss() const {
  return tally_ == LossTally::kItem ? total_ : (history_total_.defined() ? history_total_.item() : 0.0);
}

void TruncatedBptt::reset(RNNModel::State hidden) {
  hidden_ = std::move(hidden);
  total_ = 0.0;
  history_total_ = Tensor();
}

std::vector<ChunkMemory> memory_per_chunk(const ModelConfig& config, int64_t batch, int64_t bptt, int64_t chunks,
                                          LossTally tally) {
  ember::manual_seed(0);
  auto model = std::make_shared<RNNModel>(config);
  ember::optim::SGD optimizer(model->parameters(), ember::optim::SGDOptions(1.0));
  TruncatedBptt loop([&](const Tensor& x, const RNNModel::State& h) { return model->forward(x, h); },
                     model->parameters(), optimizer, 0.25, bptt, tally);
  const Tensor source = ember::randint(0, config.ntoken, {chunks * bptt + 1, batch});
  loop.reset(model->init_hidden(batch));
  std::vector<ChunkMemory> out;
  out.reserve(static_cast<size_t>(chunks));
  for (int64_t c = 0; c < chunks; ++c) {
    loop.step(source, c);
    ChunkMemory m;
    m.allocated_bytes = ember::memory_stats(ember::Device::cpu()).allocated_bytes;
    m.heap_bytes = static_cast<int64_t>(::mallinfo2().uordblks);
    out.push_back(m);
  }
  return out;
}

// ---- the run ------------------------------------------------------------------------------------

std::vector<EpochResult> train(const Options& o, std::FILE* out) {
  if (o.ft) return train_ft(o, out);  // Note [word_lm --ft] in train_ft.cpp
  const DistributedJob job =
      ember_examples::join_job("word_lm", {.ddp = o.ddp, .backend = o.backend, .timeout_s = o.timeout_s}, out);
  std::FILE* info = job.is_main() ? out : nullptr;  // see Note [word_lm under DDP]
  const int cores = std::max(1, std::min(ember::available_cpu_count(),
                                         static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))));
  const int threads = o.threads > 0 ? o.threads : std::max(1, cores / job.local_world);
  ember::set_num_threads(threads);
  if (o.deterministic) ember::use_deterministic_algorithms(true);
  EMBER_CHECK_T(ember::ValueError, !o.deterministic || o.shards >= job.world, "--deterministic: --shards ", o.shards,
                " must be at least the number of ranks, ", job.world);
  for (const auto& [flag, n] : {std::pair<const char*, int64_t>{"--batch-size", o.batch_size},
                                {"--eval-batch-size", o.eval_batch_size}}) {
    EMBER_CHECK_T(ember::ValueError, o.deterministic || n % job.world == 0, flag, " ", n,
                  " counts the streams of all ranks; under --ddp it must divide evenly over the ", job.world,
                  " ranks");
  }

  // ---- data (Note [Corpus recipe] in corpus.cpp) ----------------------------------------------
  const detail::Corpus corpus = detail::load_corpus(o, info);
  const std::vector<int64_t>&train_ids = corpus.train, &valid_ids = corpus.valid, &test_ids = corpus.test;
  // --deterministic: this rank's shards [first_shard, last_shard) of shard_width streams each, and
  // every stream of the held-out splits (Note [word_lm shards]).
  const int64_t first_shard = job.rank * o.shards / job.world, last_shard = (job.rank + 1) * o.shards / job.world;
  const int64_t shard_width = o.batch_size / o.shards;
  const int64_t rank_batch = o.deterministic ? (last_shard - first_shard) * shard_width : o.batch_size / job.world;
  const int64_t rank_eval = o.deterministic ? o.eval_batch_size : o.eval_batch_size / job.world;
  const int64_t first_column = o.deterministic ? first_shard * shard_width : job.rank * rank_batch;
  const int64_t first_eval = o.deterministic ? 0 : job.rank * rank_eval;
  const Tensor train_data = batchify(train_ids, o.batch_size, first_column, rank_batch);
  const Tensor valid_data = batchify(valid_ids, o.eval_batch_size, first_eval, rank_eval);
  const Tensor test_data = batchify(test_ids, o.eval_batch_size, first_eval, rank_eval);

  // ---- model, optimizer, DDP ------------------------------------------------------------------
  ember::manual_seed(o.seed);
  const ModelConfig mc = detail::model_config(o, corpus.ntoken);
  auto model = std::make_shared<RNNModel>(mc);
  ember::optim::SGD optimizer(model->parameters(), ember::optim::SGDOptions(o.lr));
  RunState state;
  state.lr = o.lr;
  if (o.resume) state = resume_from(o, job, *model, optimizer, mc.ntoken, info);

  TruncatedBptt::Forward forward = [&](const Tensor& x, const RNNModel::State& h) { return model->forward(x, h); };
  std::shared_ptr<ember::parallel::DistributedDataParallel<RNNModel>> ddp;
  if (o.ddp) {
    ember::parallel::DistributedDataParallelOptions ddpo;
    ddpo.timeout_ms = job.timeout_ms;
    ddpo.deterministic = o.deterministic;
    ddpo.num_shards = o.shards;
    ddp = std::make_shared<ember::parallel::DistributedDataParallel<RNNModel>>(model, job.group, ddpo);
    forward = [&](const Tensor& x, const RNNModel::State& h) { return (*ddp)(x, h); };
  }
  TruncatedBptt loop(forward, model->parameters(), optimizer, o.clip, o.bptt);
  // --deterministic without --ddp: the same exact shard sum in this process alone.
  std::unique_ptr<ember::parallel::DeterministicReducer> local_shards;
  if (o.deterministic && !o.ddp) local_shards = ember_examples::local_shard_reducer(*model, o.shards);

  int64_t num_params = 0;
  for (const Tensor& p : model->parameters()) num_params += p.numel();
  say(info,
      "word_lm: Embedding(%lld, %lld) -> Dropout(%g) -> LSTM(%lld, %lld, num_layers=%lld, dropout=%g) -> Dropout -> "
      "Linear(%lld, %lld)%s: %lld parameters\n",
      static_cast<long long>(mc.ntoken), static_cast<long long>(mc.ninp), mc.dropout, static_cast<long long>(mc.ninp),
      static_cast<long long>(mc.nhid), static_cast<long long>(mc.nlayers), mc.dropout,
      static_cast<long long>(mc.nhid), static_cast<long long>(mc.ntoken), mc.tied ? ", decoder tied to the embedding" : "",
      static_cast<long long>(num_params));
  say(info, "word_lm: %lld streams x bptt %lld (%lld chunks per epoch), SGD lr %g, clip %g, seed %llu, %d thread%s%s\n",
      static_cast<long long>(o.batch_size), static_cast<long long>(o.bptt),
      static_cast<long long>(loop.num_chunks(train_data)), state.lr, o.clip, static_cast<unsigned long long>(o.seed),
      threads, threads == 1 ? "" : "s", o.ddp ? (" per rank, DistributedDataParallel over " + std::to_string(job.world) +
                                                 " ranks (" + job.group->backend_name() + " backend)")
                                                    .c_str()
                                              : "");
  if (o.deterministic) {
    say(info, "word_lm: --deterministic: %lld shards of %lld streams\n", static_cast<long long>(o.shards),
        static_cast<long long>(shard_width));
  }

  std::vector<EpochResult> results;
  const int64_t chunks = loop.num_chunks(train_data);
  const size_t epoch_tokens = static_cast<size_t>((train_data.size(0) - 1) * o.batch_size);
  int64_t step = state.step;
  bool stopped = false;
  ember_examples::TrainingObserver observer(o.observe, job.group, ember::Device::cpu(), "word_lm", "tokens_per_s");
  for (int epoch = state.epochs_done + 1; epoch <= o.epochs && !stopped; ++epoch) {
    ember::manual_seed(ember_examples::epoch_seed(o.seed, epoch) + static_cast<uint64_t>(job.rank));
    optimizer.param_groups()[0].options().set_lr(state.lr);
    EpochResult r;
    r.epoch = epoch;
    r.lr = state.lr;
    model->train();
    loop.reset(model->init_hidden(rank_batch));
    ember_examples::ProgressBar bar("epoch " + std::to_string(epoch) + "/" + std::to_string(o.epochs), epoch_tokens,
                                    job.is_main() ? o.progress : ProgressMode::None, stderr, "tokens");
    const auto t0 = Clock::now();
    size_t seen = 0;
    // --deterministic (Note [word_lm shards]): this epoch's shard losses before this run (all
    // ranks) and in it (this rank's).
    const bool resumed_epoch = epoch == state.epochs_done + 1 && state.chunks_done > 0;
    const double carried_sum = resumed_epoch ? state.loss_sum : 0.0, carried_count = resumed_epoch ? state.loss_count : 0.0;
    double shard_loss_sum = 0.0, shard_losses = 0.0;
    if (o.deterministic) {
      const int64_t held = last_shard - first_shard;
      std::vector<RNNModel::State> hidden(static_cast<size_t>(held));
      Tensor saved;  // [2, nlayers, batch, nhid] from the --max-steps checkpoint
      if (resumed_epoch) saved = ember::load_safetensors_map(hidden_path(last_checkpoint_path(o.checkpoint_dir))).at("state");
      for (int64_t j = 0; j < held; ++j) {
        if (!resumed_epoch) {
          hidden[static_cast<size_t>(j)] = model->init_hidden(shard_width);
          continue;
        }
        const Tensor cols = ember::narrow(saved, 2, (first_shard + j) * shard_width, shard_width);
        hidden[static_cast<size_t>(j)] = {ember::contiguous(ember::select(cols, 0, 0)),
                                          ember::contiguous(ember::select(cols, 0, 1))};
      }
      const std::vector<Tensor> params = model->parameters();
      for (int64_t c = resumed_epoch ? state.chunks_done : 0; c < chunks && !stopped; ++c) {
        const int64_t i = c * o.bptt, len = std::min(o.bptt, train_data.size(0) - 1 - i);
        observer.before_step(step + 1);
        const double sum_before = shard_loss_sum, count_before = shard_losses;
        optimizer.zero_grad();
        for (int64_t j = 0; j < held; ++j) {
          const bool last = j + 1 == held;
          const Tensor x = ember::contiguous(ember::narrow(ember::narrow(train_data, 0, i, len), 1, j * shard_width, shard_width));
          const Tensor y = ember::reshape(
              ember::contiguous(ember::narrow(ember::narrow(train_data, 0, i + 1, len), 1, j * shard_width, shard_width)),
              {-1});
          RNNModel::State& h = hidden[static_cast<size_t>(j)];
          h = repackage_hidden(h);
          ember::manual_seed(shard_seed(o.seed, epoch, c, first_shard + j));
          if (local_shards) {
            local_shards->set_sync(last);
            local_shards->prepare_for_backward(nullptr);
          }
          auto run = [&] {
            auto [logits, next] = ddp ? (*ddp)(x, h) : model->forward(x, h);
            h = next;
            const Tensor loss = ember::nn::F::cross_entropy(logits, y);
            loss.backward();
            return loss.item();
          };
          if (ddp && !last) {
            auto no_sync = ddp->no_sync();
            shard_loss_sum += run();
          } else {
            shard_loss_sum += run();
          }
          shard_losses += 1.0;
        }
        const double grad_norm = ember::nn::utils::clip_grad_norm_(params, o.clip);
        optimizer.step();
        ++step;
        seen += static_cast<size_t>(len * o.batch_size);
        observer.after_step(step, (shard_loss_sum - sum_before) / (shard_losses - count_before), len * o.batch_size,
                            state.lr, params, grad_norm);
        bar.update(seen, shard_loss_sum / shard_losses);
        if (o.max_steps > 0 && step >= o.max_steps) {
          // Every shard's state on rank 0 (Note [word_lm shards]): each rank fills its columns of
          // a zero [2, nlayers, batch, nhid]; rank 0 takes each shard's columns from its holder.
          std::vector<Tensor> mine;
          for (const auto& st : hidden) mine.push_back(ember::stack({std::get<0>(st), std::get<1>(st)}, 0));
          const int64_t before = first_column, after = o.batch_size - first_column - rank_batch;
          const auto zeros_of = [&](int64_t n) {
            return ember::zeros({2, mc.nlayers, n, mc.nhid}, ember::TensorOptions(ember::kFloat32));
          };
          std::vector<Tensor> parts;
          if (before > 0) parts.push_back(zeros_of(before));
          parts.insert(parts.end(), mine.begin(), mine.end());
          if (after > 0) parts.push_back(zeros_of(after));
          const Tensor full = ember::cat(parts, 2);
          Tensor all = full;
          if (job.world > 1) {
            std::vector<Tensor> gathered;
            for (int q = 0; q < job.world; ++q) gathered.push_back(ember::empty_like(full));
            job.group->all_gather(gathered, full)->wait(job.timeout_ms);
            std::vector<Tensor> cols;
            for (int q = 0; q < job.world; ++q) {
              const int64_t a = q * o.shards / job.world * shard_width, b = (q + 1) * o.shards / job.world * shard_width;
              if (b > a) cols.push_back(ember::narrow(gathered[static_cast<size_t>(q)], 2, a, b - a));
            }
            all = ember::cat(cols, 2);
          }
          const std::vector<double> so_far = job.sum({shard_loss_sum, shard_losses});
          RunState at = state;
          at.lr = state.lr;
          at.epochs_done = epoch - 1;
          at.step = step;
          at.chunks_done = c + 1;
          at.loss_sum = carried_sum + so_far[0];
          at.loss_count = carried_count + so_far[1];
          if (job.is_main()) {
            std::filesystem::create_directories(o.checkpoint_dir);
            auto extra = detail::run_identity(o, job.world, mc.ntoken);
            extra["epoch"] = std::to_string(at.epochs_done);
            extra["next_lr"] = fmt(at.lr);
            extra["best_val_loss"] = fmt(at.best_val);
            extra["step"] = std::to_string(at.step);
            extra["chunks_done"] = std::to_string(at.chunks_done);
            extra["train_loss_sum"] = fmt(at.loss_sum);
            extra["train_loss_count"] = fmt(at.loss_count);
            const std::string path = last_checkpoint_path(o.checkpoint_dir);
            ember::save_safetensors(hidden_path(path), {{"state", all}});
            ember::nn::save_checkpoint(path, *model, &optimizer, extra);
          }
          job.barrier();  // the checkpoint is on disk before anyone goes on
          say(info, "word_lm: stopped after step %lld (--max-steps), at chunk %lld of epoch %d\n",
              static_cast<long long>(step), static_cast<long long>(c + 1), epoch);
          stopped = true;
        }
      }
    } else {
      for (int64_t c = 0; c < chunks; ++c) {
        observer.before_step(step + 1);
        const double chunk_loss = loop.step(train_data, c);
        ++step;
        const int64_t rows = std::min(o.bptt, train_data.size(0) - 1 - c * o.bptt);
        seen += static_cast<size_t>(rows * o.batch_size);
        observer.after_step(step, chunk_loss, rows * o.batch_size, state.lr, model->parameters(), loop.last_grad_norm());
        bar.update(seen, loop.total_loss() / static_cast<double>(c + 1));
      }
    }
    r.epoch_s = std::chrono::duration<double>(Clock::now() - t0).count();
    bar.finish();
    if (stopped) break;

    const auto e0 = Clock::now();
    const auto [val_sum, val_n] = evaluate(*model, valid_data, o.bptt);
    const auto [test_sum, test_n] = evaluate(*model, test_data, o.bptt);
    const double eval_s = std::chrono::duration<double>(Clock::now() - e0).count();
    if (o.deterministic) {  // every rank evaluated every stream (Note [word_lm shards])
      const std::vector<double> totals = job.sum({shard_loss_sum, shard_losses});
      r.train_loss = (carried_sum + totals[0]) / (carried_count + totals[1]);
      r.val_loss = val_sum / val_n;
      r.test_loss = test_sum / test_n;
    } else {
      const std::vector<double> totals = job.sum({loop.total_loss(), static_cast<double>(chunks), val_sum, val_n,
                                                  test_sum, test_n});
      r.train_loss = totals[0] / totals[1];
      r.val_loss = totals[2] / totals[3];
      r.test_loss = totals[4] / totals[5];
    }
    r.tokens_per_s = r.epoch_s > 0 ? static_cast<double>(epoch_tokens) / r.epoch_s : 0.0;

    const bool best = r.val_loss < state.best_val;
    if (best) {
      state.best_val = r.val_loss;
    } else {
      state.lr /= 4.0;  // anneal: no improvement on validation
    }
    state.epochs_done = epoch;
    state.step = step;
    state.chunks_done = 0;
    if (job.is_main()) {
      save_epoch(o, job, *model, optimizer, mc.ntoken, r, state, best);
      append_metrics(o, job, r, state.lr, threads, eval_s,
                     {static_cast<int64_t>(train_ids.size()), static_cast<int64_t>(valid_ids.size()),
                      static_cast<int64_t>(test_ids.size())},
                     mc.ntoken);
    }
    job.barrier();  // every rank goes on only once the checkpoint is on disk
    say(info,
        "epoch=%d lr=%g train_loss=%.4f train_ppl=%.2f val_loss=%.4f val_ppl=%.2f test_loss=%.4f test_ppl=%.2f "
        "epoch_s=%.2f tokens_per_s=%.0f%s\n",
        epoch, r.lr, r.train_loss, std::exp(r.train_loss), r.val_loss, std::exp(r.val_loss), r.test_loss,
        std::exp(r.test_loss), r.epoch_s, r.tokens_per_s, best ? "" : " (no improvement: lr / 4)");
    observer.epoch_end(step, {{"train_loss", r.train_loss},
                              {"train_perplexity", std::exp(r.train_loss)},
                              {"val_perplexity", std::exp(r.val_loss)},
                              {"test_perplexity", std::exp(r.test_loss)},
                              {"lr", r.lr},
                              {"tokens_per_s", r.tokens_per_s}});
    results.push_back(r);
  }
  if (state.epochs_done >= o.epochs && results.empty()) {
    say(info, "word_lm: nothing to do: the checkpoint already has %d of --epochs %d\n", state.epochs_done, o.epochs);
  }
  job.barrier();  // rank 0 may host the store: nobody leaves before everyone is done with it
  return results;
}

}  // namespace word_lm
