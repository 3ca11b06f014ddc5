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
#include "core/error.h"
#include "core/generator.h"
#include "core/ops/random.h"
#include "core/serialization.h"
#include "core/thread_pool.h"
#include "examples/common/distributed_job.h"
#include "examples/common/progress.h"
#include "examples/word_lm/bible_data.h"
#include "examples/word_lm/corpus.h"
#include "nn/checkpoint.h"
#include "nn/functional.h"
#include "nn/optim/sgd.h"
#include "nn/utils/clip_grad.h"
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

namespace {

using Clock = std::chrono::steady_clock;
using ember::Tensor;
using ember_examples::DistributedJob;
using ember_examples::say;

std::string fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

// The held-out loss: sum of token losses and token count over this rank's columns of `source`.
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

// What a checkpoint must agree on with this run for --resume to continue the same run.
std::map<std::string, std::string> run_identity(const Options& o, const DistributedJob& job, int64_t ntoken) {
  return {{"seed", std::to_string(o.seed)},
          {"ddp_world_size", o.ddp ? std::to_string(job.world) : "none"},
          {"batch_size", std::to_string(o.batch_size)},
          {"bptt", std::to_string(o.bptt)},
          {"ntoken", std::to_string(ntoken)},
          {"train_tokens", o.train_tokens ? std::to_string(*o.train_tokens) : "all"},
          {"dropout", fmt(o.dropout)},
          {"clip", fmt(o.clip)},
          {"tied", o.tied ? "true" : "false"}};
}

std::string last_checkpoint_path(const std::string& dir) { return dir + "/last.safetensors"; }

struct RunState {
  int epochs_done = 0;
  double lr = 0.0;
  double best_val = std::numeric_limits<double>::infinity();
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
  for (const auto& [key, value] : run_identity(o, job, ntoken)) {
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
  say(info, "word_lm: resumed from %s (epoch %d done, next lr %g)\n", path.c_str(), s.epochs_done, s.lr);
  return s;
}

void save_epoch(const Options& o, const DistributedJob& job, const RNNModel& model,
                const ember::optim::Optimizer& optimizer, int64_t ntoken, const EpochResult& r, const RunState& s,
                bool best) {
  std::filesystem::create_directories(o.checkpoint_dir);
  auto extra = run_identity(o, job, ntoken);
  extra["epoch"] = std::to_string(r.epoch);
  extra["next_lr"] = fmt(s.lr);
  extra["best_val_loss"] = fmt(s.best_val);
  extra["val_loss"] = fmt(r.val_loss);
  extra["test_loss"] = fmt(r.test_loss);
  const std::string dir = o.checkpoint_dir;
  ember::nn::save_checkpoint(dir + "/epoch-" + std::to_string(r.epoch) + ".safetensors", model, &optimizer, extra);
  if (best) ember::nn::save_checkpoint(dir + "/best.safetensors", model, &optimizer, extra);
  ember::nn::save_checkpoint(last_checkpoint_path(dir), model, &optimizer, extra);
}

void append_metrics(const Options& o, const DistributedJob& job, const EpochResult& r, double next_lr, int threads,
                    double eval_s, const std::vector<int64_t>& split_tokens, int64_t ntoken) {
  const std::filesystem::path p(o.metrics_path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
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
      {"time", static_cast<int64_t>(
                   std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                       .count())}};
  std::ofstream f(o.metrics_path, std::ios::app);
  EMBER_CHECK(f.good(), "cannot open the metrics file ", o.metrics_path);
  f << j.dump() << '\n';
  f.flush();
  EMBER_CHECK(f.good(), "cannot write the metrics file ", o.metrics_path);
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
  ember::nn::utils::clip_grad_norm_(parameters_, clip_);
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
  const DistributedJob job =
      ember_examples::join_job("word_lm", {.ddp = o.ddp, .backend = o.backend, .timeout_s = o.timeout_s}, out);
  std::FILE* info = job.is_main() ? out : nullptr;  // see Note [word_lm under DDP]
  const int cores = std::max(1, std::min(ember::available_cpu_count(),
                                         static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))));
  const int threads = o.threads > 0 ? o.threads : std::max(1, cores / job.local_world);
  ember::set_num_threads(threads);
  for (const auto& [flag, n] : {std::pair<const char*, int64_t>{"--batch-size", o.batch_size},
                                {"--eval-batch-size", o.eval_batch_size}}) {
    EMBER_CHECK_T(ember::ValueError, n % job.world == 0, flag, " ", n,
                  " counts the streams of all ranks; under --ddp it must divide evenly over the ", job.world,
                  " ranks");
  }

  // ---- data (Note [Corpus recipe] in corpus.cpp) ----------------------------------------------
  CorpusSplits splits = split_by_chapter(read_bible_text(o.data));
  if (o.train_tokens) {
    const auto eval_tokens = static_cast<size_t>(std::max<int64_t>(*o.train_tokens / 10, 2 * o.eval_batch_size));
    splits.train.resize(std::min(splits.train.size(), static_cast<size_t>(*o.train_tokens)));
    splits.valid.resize(std::min(splits.valid.size(), eval_tokens));
    splits.test.resize(std::min(splits.test.size(), eval_tokens));
  }
  const Vocabulary vocab(splits.train, o.vocab_size);
  const std::vector<int64_t> train_ids = vocab.encode(splits.train), valid_ids = vocab.encode(splits.valid),
                             test_ids = vocab.encode(splits.test);
  const int64_t unk = std::count(train_ids.begin(), train_ids.end(), int64_t{0});
  say(info,
      "word_lm: corpus %s: %lld chapters, %lld verses; tokens train=%zu valid=%zu test=%zu%s; vocabulary %lld "
      "(%.2f%% of training tokens are <unk>)\n",
      o.data.c_str(), static_cast<long long>(splits.chapters), static_cast<long long>(splits.verses),
      train_ids.size(), valid_ids.size(), test_ids.size(), o.train_tokens ? " (--train-tokens)" : "",
      static_cast<long long>(vocab.size()), train_ids.empty() ? 0.0 : 100.0 * static_cast<double>(unk) / train_ids.size());
  const int64_t rank_batch = o.batch_size / job.world, rank_eval = o.eval_batch_size / job.world;
  const Tensor train_data = batchify(train_ids, o.batch_size, job.rank * rank_batch, rank_batch);
  const Tensor valid_data = batchify(valid_ids, o.eval_batch_size, job.rank * rank_eval, rank_eval);
  const Tensor test_data = batchify(test_ids, o.eval_batch_size, job.rank * rank_eval, rank_eval);

  // ---- model, optimizer, DDP ------------------------------------------------------------------
  ember::manual_seed(o.seed);
  ModelConfig mc;
  mc.ntoken = vocab.size();
  mc.ninp = o.emsize;
  mc.nhid = o.nhid;
  mc.nlayers = o.nlayers;
  mc.dropout = o.dropout;
  mc.tied = o.tied;
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
    ddp = std::make_shared<ember::parallel::DistributedDataParallel<RNNModel>>(model, job.group, ddpo);
    forward = [&](const Tensor& x, const RNNModel::State& h) { return (*ddp)(x, h); };
  }
  TruncatedBptt loop(forward, model->parameters(), optimizer, o.clip, o.bptt);

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

  std::vector<EpochResult> results;
  const int64_t chunks = loop.num_chunks(train_data);
  const size_t epoch_tokens = static_cast<size_t>((train_data.size(0) - 1) * o.batch_size);
  for (int epoch = state.epochs_done + 1; epoch <= o.epochs; ++epoch) {
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
    for (int64_t c = 0; c < chunks; ++c) {
      loop.step(train_data, c);
      seen += static_cast<size_t>(std::min(o.bptt, train_data.size(0) - 1 - c * o.bptt) * o.batch_size);
      bar.update(seen, loop.total_loss() / static_cast<double>(c + 1));
    }
    r.epoch_s = std::chrono::duration<double>(Clock::now() - t0).count();
    bar.finish();

    const auto e0 = Clock::now();
    const auto [val_sum, val_n] = evaluate(*model, valid_data, o.bptt);
    const auto [test_sum, test_n] = evaluate(*model, test_data, o.bptt);
    const std::vector<double> totals = job.sum({loop.total_loss(), static_cast<double>(chunks), val_sum, val_n,
                                                test_sum, test_n});
    const double eval_s = std::chrono::duration<double>(Clock::now() - e0).count();
    r.train_loss = totals[0] / totals[1];
    r.val_loss = totals[2] / totals[3];
    r.test_loss = totals[4] / totals[5];
    r.tokens_per_s = r.epoch_s > 0 ? static_cast<double>(epoch_tokens) / r.epoch_s : 0.0;

    const bool best = r.val_loss < state.best_val;
    if (best) {
      state.best_val = r.val_loss;
    } else {
      state.lr /= 4.0;  // anneal: no improvement on validation
    }
    state.epochs_done = epoch;
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
    results.push_back(r);
  }
  if (state.epochs_done >= o.epochs && results.empty()) {
    say(info, "word_lm: nothing to do: the checkpoint already has %d of --epochs %d\n", state.epochs_done, o.epochs);
  }
  job.barrier();  // rank 0 may host the store: nobody leaves before everyone is done with it
  return results;
}

}  // namespace word_lm
