#include "examples/rnn_dp/train.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "autograd/autocast.h"
#include "autograd/ops.h"
#include "core/cpu_affinity.h"
#include "core/deterministic.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/thread_pool.h"
#include "data/batch_sampler.h"
#include "data/dataloader.h"
#include "data/distributed_sampler.h"
#include "data/worker_info.h"
#include "examples/rnn_dp/model.h"
#include "examples/rnn_dp/train_detail.h"
#include "examples/common/distributed_job.h"
#include "examples/common/ft_job.h"
#include "examples/common/observe.h"
#include "examples/common/progress.h"
#include "examples/rnn_dp/wordlang_dataset.h"
#include "nn/checkpoint.h"
#include "nn/functional.h"
#include "nn/optim/adam.h"
#include "nn/optim/grad_scaler.h"
#include "parallel/data_parallel.h"
#include "parallel/deterministic_reducer.h"
#include "parallel/distributed_data_parallel.h"
#include "parallel/found_inf_sync.h"
#include "parallel/zero_redundancy_optimizer.h"

namespace rnn_dp {

// Note [Deterministic runs]
// A run is a function of (seed, batch size, --limit, --batch-first, --augment, --workers) and of
// the per-device thread count, so that DataParallel and single-device runs can be compared and
// --resume continues bit-exactly:
//  - initialization draws from ember's default generators, seeded with --seed;
//  - epoch e (1-based) visits the training words in the order of a DistributedSampler with one
//    replica, seed --seed, set_epoch(e - 1): a function of (seed, e) only, never of earlier
//    epochs' draws;
//  - the DataLoader's per-epoch worker base seed comes from a generator re-seeded with
//    epoch_seed(seed, e) before each epoch, and the main process's augmentation RNG (workers=0)
//    is re-seeded with it too;
//  - nothing else draws random numbers (the model has no dropout);
//  - the checkpoint holds the model, Adam's state (step, exp_avg, exp_avg_sq), the default
//    generator's state, the epochs done and, for a checkpoint taken within an epoch
//    (--checkpoint-every, --max-steps), how many samples of it all ranks consumed together,
//    so a resumed run continues from exactly the state an uninterrupted run has there.
// DataParallel sums the replicas' gradients, so it matches a single-device run up to float
// rounding (the tests check 1e-5), not bit for bit.

// Note [DDP mode]
// With --ddp every process is one rank (ember-run or mpirun starts them; init_process_group
// reads their environment). Rank r visits the shard DistributedSampler(world, r) gives it:
// with the same seed and epoch every rank draws the same permutation and takes positions
// r, r + world, ...; --batch-size is the global batch, so each rank's batch k holds
// batch/world of the words at positions [k * batch, (k + 1) * batch) of that permutation,
// exactly the words of the single-process run's batch k. DistributedDataParallel averages
// the ranks' gradients, so when every batch is full (the shard sizes divide evenly) a run over
// N ranks follows the single-process run up to float rounding. The epoch's loss and the test
// accuracy are sums over the ranks (each evaluates every world-th test batch). Rank 0 alone
// prints, writes metrics and saves checkpoints, and every rank waits at a barrier until the
// epoch's checkpoint is on disk, so "the last checkpoint" is an epoch every rank finished.
// --resume: every rank loads it (model and Adam state); DDP's construction then broadcasts
// rank 0's parameters, which changes nothing.
//
// Note [Resume at any world size]
// Nothing in a checkpoint depends on the number of ranks that wrote it: the model, Adam's state
// whole (under --zero, consolidated on rank 0 first; each rank of the resumed job takes its own
// shard of it, so N ranks' shards become M ranks' shards), the generator, and the position in
// the epoch counted in global samples (Note [Global sample position] in
// data/distributed_sampler.cpp). Since --batch-size is the global batch, a job resumed on M
// ranks (or with no --ddp at all) visits the same global batches as the job it continues, so
// with every batch full it follows the uninterrupted run up to float rounding. What must match
// is the seed, the global batch, --limit, --lr, --batch-first and --augment (run_identity);
// --augment draws per-rank streams, so only its sample order, not its draws, carries over to
// another world size (under --deterministic its draws carry over too: Note [Shard steps]). A rank that dies makes the others' next
// collective fail with DistributedError (see parallel/README.md); under
// `ember-run --max-restarts K` the group restarts and, with --resume, continues from there.

// Note [Shard steps]
// --deterministic gives the same bits (model, Adam's state) after any number of steps whether
// the job runs in one process or over any number of ranks, with any number of intra-op threads
// or DataLoader workers, and across a resume at another world size (Note [World-size
// invariance] in parallel/deterministic_reducer.cpp):
//  - the global batch k is positions [k * batch, (k + 1) * batch) of the epoch's order (one
//    replica's DistributedSampler, seed and epoch: the same for every rank) and is cut into
//    --shards shards of batch/shards samples; rank r of W takes shards [r*S/W, (r+1)*S/W)
//    (ShardBatchSampler), so 3 ranks over 8 shards take 3, 3 and 2; a last partial global batch
//    of an epoch is dropped;
//  - each shard runs its own forward and backward, its padded input cut to its own longest word,
//    so its kernels see the same shapes whoever runs it; all but a rank's last shard run under
//    no_sync(), and DistributedDataParallel's deterministic option (without --ddp the same
//    DeterministicReducer with no group) sums the shards exactly and writes their mean;
//  - DataParallel over several devices runs each shard as its own replica (ShardLoss: the same
//    cut, forward and loss) with its deterministic option and average_shards, whose exact sum
//    writes the same mean (Note [DataParallel shards] in parallel/data_parallel.cpp); the
//    step's backward runs on the sum of the gathered shard losses, so each shard's gradient is
//    that of its own loss, as in the loop above;
//  - dropout (--dropout) draws each sample's mask from a generator seeded by (seed, epoch, the
//    sample's position in the epoch), never from the rank, the worker or the step's draws (this
//    holds without --deterministic too);
//  - --augment draws each word's byte drop from a stream of (epoch_seed(seed, epoch), the
//    word's index in the training set) (WordLangDataset::use_sample_streams), never from the
//    rank or the worker; nothing else draws.
//  - --amp: the same autocast around every shard's forward and loss (DataParallel's replicas
//    get it from parallel_apply), and under fp16 GradScaler::scale on each shard's loss: a power
//    of two, so the exact mean unscales to the same bits wherever the shards ran.

namespace detail {

std::map<std::string, std::string> run_identity(const Options& o) {
  auto fmt17 = [](double v) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.17g", v);
    return std::string(buf);
  };
  return {{"seed", std::to_string(o.seed)},
          {"batch_size", std::to_string(o.batch_size)},
          {"batch_first", o.batch_first ? "true" : "false"},
          {"limit", o.limit ? std::to_string(*o.limit) : "none"},
          {"lr", fmt17(o.lr)},
          {"augment", fmt17(o.augment_p)}};
}

std::string last_checkpoint_path(const std::string& dir) { return dir + "/last.safetensors"; }

ember::Tensor dropout_keep(uint64_t seed, int epoch, const std::vector<uint64_t>& positions, int64_t width, double p) {
  std::vector<float> keep;
  keep.reserve(positions.size() * static_cast<size_t>(width));
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  for (uint64_t pos : positions) {
    // splitmix64 of the three, so nearby positions get unrelated streams
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(epoch) * 0xBF58476D1CE4E5B9ull + pos + 1;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    ember::Generator g(z);
    for (float u : ember::rand({width}, {}, &g).to_vector<float>()) keep.push_back(u >= p ? scale : 0.0f);
  }
  return ember::from_vector(keep, {static_cast<int64_t>(positions.size()), width});
}

}  // namespace detail

namespace {

using Clock = std::chrono::steady_clock;
using ember::Device;
using ember::Tensor;
using Loader = ember::data::DataLoader<WordLangDataset, WordBatchCollate>;
using Rank = ember_examples::DistributedJob;
using ember_examples::epoch_seed;
using ember_examples::ProgressBar;
using ember_examples::say;
using detail::dropout_keep;
using detail::last_checkpoint_path;

std::string join_devices(const std::vector<Device>& devices) {
  std::string s;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (i) s += ',';
    s += devices[i].str();
  }
  return s;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

// Any world size resumes: Note [Resume at any world size].
std::map<std::string, std::string> run_identity(const Options& o, const Rank&) { return detail::run_identity(o); }

// Checkpoint metadata keys of the GradScaler's state (--amp fp16): "grad_scaler.scale", ...
constexpr const char* kScalerPrefix = "grad_scaler.";

// The training step's optimizer: Adam over every parameter, or under --zero the shard of Adam
// that ZeroRedundancyOptimizer gives this rank. Checkpoints always hold Adam's whole state.
// --amp fp16 adds a GradScaler (not with --zero: options.cpp), whose overflow flag is all-reduced
// under --ddp so every rank skips the same steps; its state travels in the checkpoint metadata.
class TrainOptimizer {
 public:
  TrainOptimizer(const Options& o, const Rank& job, WordLangModel& model, Device device) : model_(model), lr_(o.lr) {
    ember::optim::GradScalerOptions so;
    so.enabled = o.amp == "fp16";
    if (so.enabled && job.group) {
      so.found_inf_sync = ember::parallel::all_reduce_found_inf(
          job.group, job.group->backend_name() == "nccl" ? device : Device::cpu(), job.timeout_ms);
    }
    scaler_ = std::make_unique<ember::optim::GradScaler>(so);
    if (o.zero) {
      const double lr = o.lr;
      zero_ = std::make_unique<ember::parallel::ZeroRedundancyOptimizer>(
          model.parameters(), job.group,
          [lr](std::vector<Tensor> p) { return std::make_unique<ember::optim::Adam>(p, ember::optim::AdamOptions(lr)); },
          job.timeout_ms);
    } else {
      adam_ = std::make_unique<ember::optim::Adam>(model.parameters(), ember::optim::AdamOptions(o.lr));
    }
  }
  void zero_grad() { zero_ ? zero_->zero_grad() : adam_->zero_grad(); }
  void step() {
    if (scaler_->is_enabled()) {
      scaler_->step(*adam_);
      scaler_->update();
      return;
    }
    zero_ ? zero_->step() : static_cast<void>(adam_->step());
  }
  /// The loss to call backward() on (scaled under --amp fp16).
  Tensor scale(const Tensor& loss) const { return scaler_->scale(loss); }
  const ember::optim::GradScaler& scaler() const { return *scaler_; }
  void save_scaler(std::map<std::string, std::string>& extra) const {
    for (const auto& [key, value] : scaler_->state_dict()) extra[kScalerPrefix + key] = fmt("%.17g", value);
  }
  /// The loss scale goes on where it was; a checkpoint without one (no fp16) leaves it fresh.
  void load_scaler(const std::map<std::string, std::string>& extra) {
    std::map<std::string, double> state;
    for (const auto& [key, value] : extra) {
      if (key.rfind(kScalerPrefix, 0) == 0) state[key.substr(std::strlen(kScalerPrefix))] = std::stod(value);
    }
    if (scaler_->is_enabled() && !state.empty()) scaler_->load_state_dict(state);
  }
  /// The whole state as one Adam (a collective under --zero: every rank calls it); `fn` runs on
  /// rank 0 only.
  void with_whole_state(const Rank& job, const std::function<void(const ember::optim::Optimizer&)>& fn) {
    if (!zero_) {
      if (job.is_main()) fn(*adam_);
      return;
    }
    zero_->consolidate_state_dict(0);
    if (!job.is_main()) return;
    ember::optim::Adam whole(model_.parameters(), ember::optim::AdamOptions(lr_));
    whole.load_state_dict(zero_->state_dict());
    fn(whole);
  }
  /// Loads model and optimizer state from a checkpoint (under --zero, this rank's shard of it).
  void load(const std::string& path, std::map<std::string, std::string>* extra) {
    ember::nn::LoadCheckpointOptions lo;
    lo.restore_rng_state = true;
    if (!zero_) {
      ember::nn::load_checkpoint(path, model_, adam_.get(), extra, lo);
      return;
    }
    ember::optim::Adam whole(model_.parameters(), ember::optim::AdamOptions(lr_));
    ember::nn::load_checkpoint(path, model_, &whole, extra, lo);
    zero_->load_state_dict(whole.state_dict());
  }

 private:
  WordLangModel& model_;
  double lr_;
  std::unique_ptr<ember::optim::Adam> adam_;
  std::unique_ptr<ember::parallel::ZeroRedundancyOptimizer> zero_;
  std::unique_ptr<ember::optim::GradScaler> scaler_;
};

// Where a run continues: after `epochs_done` epochs and `samples` samples (global) of the next,
// whose training loss so far sums to loss_sum over `seen` samples; `step` steps in all.
struct ResumePoint {
  int epochs_done = 0;
  size_t samples = 0;
  double loss_sum = 0.0;
  double seen = 0.0;
  int64_t step = 0;
};

std::string checkpoint_path(const std::string& dir, int epoch) {
  return dir + "/epoch-" + std::to_string(epoch) + ".safetensors";
}

// A checkpoint's number entry `key` (written by save_state); throws ValueError when it is absent
// or malformed.
double extra_number(const std::map<std::string, std::string>& extra, const std::string& path, const std::string& key) {
  auto it = extra.find(key);
  EMBER_CHECK_T(ember::ValueError, it != extra.end(), "--resume: ", path, " has no ", key, " entry");
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  EMBER_CHECK_T(ember::ValueError, !it->second.empty() && *end == '\0' && v >= 0, "--resume: ", path,
                ": entry ", key, "='", it->second, "' is not a non-negative number");
  return v;
}

// Loads <dir>/last.safetensors into model and optimizer; returns where it left off (nothing
// done when there is none). Throws when it belongs to a different run.
ResumePoint resume_from(const Options& o, const Rank& job, TrainOptimizer& optimizer, size_t n_train,
                        std::FILE* out) {
  const std::string path = last_checkpoint_path(o.checkpoint_dir);
  if (!std::filesystem::exists(path)) {
    say(out, "rnn_dp: --resume: no checkpoint at %s, starting from epoch 1\n", path.c_str());
    return {};
  }
  std::map<std::string, std::string> extra;
  optimizer.load(path, &extra);
  optimizer.load_scaler(extra);
  for (const auto& [key, value] : run_identity(o, job)) {
    auto it = extra.find(key);
    EMBER_CHECK_T(ember::ValueError, it != extra.end() && it->second == value, "--resume: ", path,
                  " was written by a run with ", key, "=", it == extra.end() ? "<absent>" : it->second,
                  " but this run has ", key, "=", value, "; resume with the same options or remove the checkpoint");
  }
  ResumePoint p;
  p.epochs_done = static_cast<int>(extra_number(extra, path, "epoch"));
  // Checkpoints of epoch ends only (before --checkpoint-every) have none of these.
  if (extra.count("epoch_samples")) {
    p.samples = static_cast<size_t>(extra_number(extra, path, "epoch_samples"));
    p.loss_sum = extra_number(extra, path, "epoch_loss_sum");
    p.seen = extra_number(extra, path, "epoch_seen");
    p.step = static_cast<int64_t>(extra_number(extra, path, "step"));
  }
  EMBER_CHECK_T(ember::ValueError, p.samples <= n_train, "--resume: ", path, " is at sample ", p.samples,
                " of an epoch of ", n_train);
  auto world = extra.find("world_size");
  say(out, "rnn_dp: resumed from %s (epoch %d done)", path.c_str(), p.epochs_done);
  if (p.samples > 0) say(out, " at sample %zu of epoch %d", p.samples, p.epochs_done + 1);
  say(out, ", written by %s rank(s), now %d\n", world != extra.end() ? world->second.c_str() : "?", job.world);
  return p;
}

// Saves model and optimizer (a collective under --zero) as <dir>/last.safetensors and, at the
// end of epoch `at.epochs_done` (at.samples == 0, r given), as <dir>/epoch-N.safetensors too.
void save_state(const Options& o, const Rank& job, const WordLangModel& model, TrainOptimizer& optimizer,
                const ResumePoint& at, const EpochResult* r) {
  optimizer.with_whole_state(job, [&](const ember::optim::Optimizer& whole) {
    std::filesystem::create_directories(o.checkpoint_dir);
    auto extra = run_identity(o, job);
    extra["epoch"] = std::to_string(at.epochs_done);
    extra["epoch_samples"] = std::to_string(at.samples);
    extra["epoch_loss_sum"] = fmt("%.17g", at.loss_sum);
    extra["epoch_seen"] = fmt("%.17g", at.seen);
    extra["step"] = std::to_string(at.step);
    extra["world_size"] = std::to_string(job.world);
    optimizer.save_scaler(extra);
    if (r != nullptr) {
      extra["loss"] = fmt("%.17g", r->loss);
      extra["test_acc"] = fmt("%.17g", r->test_acc);
      ember::nn::save_checkpoint(checkpoint_path(o.checkpoint_dir, at.epochs_done), model, &whole, extra);
    }
    ember::nn::save_checkpoint(last_checkpoint_path(o.checkpoint_dir), model, &whole, extra);
  });
}

void append_metrics(const Options& o, const Rank& job, const EpochResult& r, const std::vector<Device>& devices,
                    int threads, double eval_s, size_t train_words, size_t test_words) {
  std::vector<std::string> devs;
  for (const auto& d : devices) devs.push_back(d.str());
  nlohmann::json j = {{"epoch", r.epoch},
                      {"loss", r.loss},
                      {"test_acc", r.test_acc},
                      {"epoch_s", r.epoch_s},
                      {"samples_per_s", r.samples_per_s},
                      {"eval_s", eval_s},
                      {"train_words", train_words},
                      {"samples_seen", r.samples},
                      {"test_words", test_words},
                      {"devices", devs},
                      {"data_parallel", !o.ddp && !o.single_device && devices.size() > 1},
                      {"amp", o.amp.empty() ? "none" : o.amp},
                      {"ddp_world_size", o.ddp ? job.world : 0},
                      {"workers", o.workers},
                      {"threads_per_device", threads},
                      {"batch_size", o.batch_size},
                      {"lr", o.lr},
                      {"seed", o.seed},
                      {"batch_first", o.batch_first},
                      {"time", ember_examples::unix_time_s()}};
  ember_examples::append_metrics_line(o.metrics_path, j.dump());
}

std::vector<WordBatch> collate_all(WordLangDataset& ds, const WordBatchCollate& collate, int64_t batch_size) {
  std::vector<WordBatch> batches;
  const size_t n = ds.size();
  for (size_t begin = 0; begin < n; begin += static_cast<size_t>(batch_size)) {
    const size_t end = std::min(n, begin + static_cast<size_t>(batch_size));
    std::vector<std::pair<Tensor, int64_t>> samples;
    samples.reserve(end - begin);
    for (size_t i = begin; i < end; ++i) samples.push_back(ds.get(i));
    batches.push_back(collate(std::move(samples)));
  }
  return batches;
}

// The batches of one rank under --deterministic (Note [Shard steps]): for each full global batch
// of `order` (one replica's order), the samples of shards [first, last).
class ShardBatchSampler : public ember::data::BatchSampler {
 public:
  ShardBatchSampler(std::shared_ptr<ember::data::DistributedSampler> order, size_t batch, size_t shards, size_t first,
                    size_t last)
      : order_(std::move(order)), batch_(batch), shard_(batch / shards), first_(first), last_(last) {}
  std::vector<std::vector<size_t>> batches() override {
    const std::vector<size_t> idx = order_->indices();
    std::vector<std::vector<size_t>> out;
    for (size_t k = 0; (k + 1) * batch_ <= idx.size(); ++k) {
      out.emplace_back(idx.begin() + static_cast<std::ptrdiff_t>(k * batch_ + first_ * shard_),
                       idx.begin() + static_cast<std::ptrdiff_t>(k * batch_ + last_ * shard_));
    }
    return out;
  }
  size_t size() const override { return order_->size() / batch_; }

 private:
  std::shared_ptr<ember::data::DistributedSampler> order_;
  size_t batch_, shard_, first_, last_;
};

// One shard's training loss under --deterministic with DataParallel (Note [Shard steps]): the
// shard's padded input cut to its own longest word, the model, cross-entropy over the shard.
class ShardLoss : public ember::nn::Cloneable<ShardLoss> {
 public:
  explicit ShardLoss(std::shared_ptr<WordLangModel> model) : Cloneable("ShardLoss"), config_(model->config()) {
    this->model = register_module("model", std::move(model));
  }
  void reset() override { model = register_module("model", std::make_shared<WordLangModel>(config_)); }
  Tensor forward(const Tensor& padded, const Tensor& lengths, const Tensor& labels, const Tensor& keep) {
    const auto lv = lengths.to_vector<int64_t>();
    const int64_t longest = *std::max_element(lv.begin(), lv.end());
    const Tensor p = ember::contiguous(ember::narrow(padded, config_.batch_first ? 1 : 0, 0, longest));
    return ember::nn::F::cross_entropy(model->forward(p, lengths, keep), labels);
  }
  std::shared_ptr<WordLangModel> model;

 private:
  ModelConfig config_;
};

int64_t count_parameters(const ember::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

}  // namespace

std::vector<EpochResult> train(const Options& o, std::FILE* out) {
  if (o.ft) return train_ft(o, out);  // Note [FT mode] in train_ft.cpp
  // ---- the job (--ddp), devices and threads --------------------------------------------------
  const Rank job =
      ember_examples::join_job("rnn_dp", {.ddp = o.ddp, .backend = o.backend, .timeout_s = o.timeout_s}, out);
  std::FILE* info = job.is_main() ? out : nullptr;  // only rank 0 reports (see Note [DDP mode])
  std::vector<Device> devices;
  if (o.ddp) {
    devices = {job.device};  // cuda:(local rank % GPUs), else cpu:0
  } else {
    devices = o.devices.empty() ? ember::parallel::default_data_parallel_devices() : o.devices;
    if (o.single_device) devices.resize(1);
  }
  const bool data_parallel = devices.size() > 1;
  // Under --ddp the ranks on this node share its cores; ember-run (and mpirun) bind each rank
  // to its own, which the affinity mask shows.
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int per_core_share = o.ddp ? job.local_world : static_cast<int>(devices.size());
  const int threads = o.threads > 0 ? o.threads
                                    : std::max(1, std::min(ember::available_cpu_count(), cores / per_core_share));
  // One process-wide intra-op pool: with DataParallel each replica thread drives it when it is
  // free and runs inline otherwise (see Note [Thread pool concurrency]), so 1 thread per device
  // means every replica computes on its own thread only.
  ember::set_num_threads(threads);
  const Device device0 = devices[0];
  if (o.deterministic) ember::use_deterministic_algorithms(true);
  EMBER_CHECK_T(ember::ValueError, !o.deterministic || o.shards >= job.world, "--deterministic: --shards ", o.shards,
                " must be at least the number of ranks, ", job.world);
  EMBER_CHECK_T(ember::ValueError, o.deterministic || o.batch_size % job.world == 0, "--batch-size ", o.batch_size,
                " is the global batch; under --ddp it must divide evenly over the ", job.world,
                " ranks (each rank takes batch/world)");
  const int64_t rank_batch = o.batch_size / job.world;

  // ---- data ------------------------------------------------------------------------------------
  WordLangSplits splits = load_wordlang(o.dict_dir, o.limit);
  const size_t n_train = splits.train.size(), n_test = splits.test.size();
  if (!o.limit) {
    EMBER_CHECK(n_train == kFullTrainWords && n_test == kFullTestWords, "the recipe gave ", n_train,
                " training and ", n_test, " test words; expected ", kFullTrainWords, " and ", kFullTestWords);
  }
  say(info, "rnn_dp: data train=%zu test=%zu (%zu languages from %s%s)\n", n_train, n_test, kLanguages.size(),
      o.dict_dir.c_str(), o.limit ? (", --limit " + std::to_string(*o.limit)).c_str() : "");

  const WordBatchCollate collate(o.batch_first);
  auto train_set = std::make_shared<WordLangDataset>(std::move(splits.train), o.augment_p);
  WordLangDataset test_set(std::move(splits.test));
  const std::vector<WordBatch> test_batches = collate_all(test_set, collate, o.eval_batch_size);

  // --uneven: no padding, each word once per epoch; ranks may then get different batch counts.
  const ember::data::DistributedSamplerOptions sampler_options{.shuffle = true, .seed = o.seed, .even = !o.uneven};
  // --deterministic: every rank walks the one-replica order and takes its shards of each global
  // batch (Note [Shard steps]).
  auto sampler = std::make_shared<ember::data::DistributedSampler>(
      n_train, o.deterministic ? 1 : static_cast<size_t>(job.world), o.deterministic ? 0 : static_cast<size_t>(job.rank),
      sampler_options);
  const int64_t first_shard = job.rank * o.shards / job.world, last_shard = (job.rank + 1) * o.shards / job.world;
  const int64_t shard_rows = o.batch_size / o.shards;
  auto loader_generator = std::make_shared<ember::Generator>(o.seed + static_cast<uint64_t>(job.rank));
  std::shared_ptr<ember::data::BatchSampler> shard_batches;
  if (o.deterministic) {
    shard_batches = std::make_shared<ShardBatchSampler>(sampler, static_cast<size_t>(o.batch_size),
                                                        static_cast<size_t>(o.shards), static_cast<size_t>(first_shard),
                                                        static_cast<size_t>(last_shard));
  }
  Loader loader(train_set,
                ember::data::DataLoaderOptions{
                    .batch_size = o.deterministic ? size_t{1} : static_cast<size_t>(rank_batch),
                    .sampler = o.deterministic ? nullptr : sampler,
                    .batch_sampler = shard_batches,
                    .num_workers = o.workers,
                    .worker_init_fn =
                        [](int /*worker_id*/) {
                          // In the forked worker: its own augmentation stream (the FAQ's per-worker
                          // seeding), and no intra-op threads (collation is single-threaded).
                          const auto info = ember::data::get_worker_info();
                          info->dataset_as<WordLangDataset>()->seed_rng(info->seed);
                          ember::set_num_threads(1);
                        },
                    .generator = loader_generator},
                collate);

  // ---- model, optimizer, parallelism -----------------------------------------------------------
  ember::manual_seed(o.seed);
  const ModelConfig mc{
      .vocab_size = kVocabSize, .num_classes = kNumClasses, .batch_first = o.batch_first, .total_length = o.total_length};
  auto model = std::make_shared<WordLangModel>(mc);
  model->to(device0);
  TrainOptimizer optimizer(o, job, *model, device0);  // see Note [Resume at any world size]
  ResumePoint resumed;
  if (o.resume) resumed = resume_from(o, job, optimizer, n_train, info);
  const int start_epoch = resumed.epochs_done + 1;

  const int64_t batch_dim = o.batch_first ? 0 : 1;
  // The training step's forward: padded, lengths, dropout keep mask (undefined: none).
  std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)> train_logits;
  std::shared_ptr<ember::parallel::DataParallel<WordEncoder>> dp;
  std::shared_ptr<ember::parallel::DistributedDataParallel<WordLangModel>> ddp;
  std::shared_ptr<ember::parallel::DataParallel<ShardLoss>> dp_shards;  // --deterministic over several devices
  auto on_device0 = [device0](const Tensor& t) { return t.device() == device0 ? t : ember::to(t, device0); };
  // The whole model on device0 (evaluation, and training without DataParallel).
  auto local_logits = [&](const Tensor& padded, const Tensor& lengths) {
    return model->forward(on_device0(padded), lengths);  // lengths stay on the host, as PyTorch's
  };
  if (o.ddp) {
    ember::parallel::DistributedDataParallelOptions ddpo;
    ddpo.timeout_ms = job.timeout_ms;
    ddpo.deterministic = o.deterministic;
    ddpo.num_shards = o.shards;
    ddp = std::make_shared<ember::parallel::DistributedDataParallel<WordLangModel>>(model, job.group, ddpo);
    train_logits = [&](const Tensor& padded, const Tensor& lengths, const Tensor& keep) {
      return (*ddp)(on_device0(padded), lengths, keep.defined() ? on_device0(keep) : keep);
    };
  } else if (data_parallel && o.deterministic) {
    ember::parallel::DataParallelOptions dpo;
    dpo.devices = devices;
    dpo.output_device = device0;
    dpo.scatter_dims = {batch_dim, 0, 0, 0};  // padded, lengths, labels, keep
    dpo.deterministic = true;
    dpo.num_shards = o.shards;
    dpo.average_shards = true;
    dp_shards = std::make_shared<ember::parallel::DataParallel<ShardLoss>>(std::make_shared<ShardLoss>(model), dpo);
  } else if (data_parallel) {
    // Output [B, T, H] gathered on dim 0, or [T, B, H] on dim 1; the input scattered along its
    // batch dim and the lengths [B] along dim 0 (the FAQ's batch_first=False case is {1, 0}).
    ember::parallel::DataParallelOptions dpo;
    dpo.devices = devices;
    dpo.output_device = device0;
    dpo.dim = batch_dim;
    dpo.scatter_dims = {batch_dim, 0};
    dp = std::make_shared<ember::parallel::DataParallel<WordEncoder>>(model->encoder, dpo);
    train_logits = [&](const Tensor& padded, const Tensor& lengths, const Tensor& keep) {
      return model->classify(dp->forward(padded, lengths), lengths, keep.defined() ? on_device0(keep) : keep);
    };
  } else {
    train_logits = [&](const Tensor& padded, const Tensor& lengths, const Tensor& keep) {
      return model->forward(on_device0(padded), lengths, keep.defined() ? on_device0(keep) : keep);
    };
  }
  // --deterministic without --ddp: the same exact shard sum in this process alone.
  std::unique_ptr<ember::parallel::DeterministicReducer> local_shards;
  if (o.deterministic && !o.ddp && !dp_shards) local_shards = ember_examples::local_shard_reducer(*model, o.shards);
  // DataParallel also runs the test pass over the devices; under --ddp each rank evaluates its
  // share of the test batches on its own device.
  auto eval_logits = data_parallel && !dp_shards ? std::function<Tensor(const Tensor&, const Tensor&)>(
                                         [&](const Tensor& padded, const Tensor& lengths) {
                                           return train_logits(padded, lengths, Tensor());
                                         })
                                   : std::function<Tensor(const Tensor&, const Tensor&)>(local_logits);

  say(info,
      "rnn_dp: Embedding(%lld, %lld, padding_idx=0) -> LSTM(%lld, %lld) over packed sequences -> mean -> "
      "Linear(%lld, %lld): %lld parameters\n",
      static_cast<long long>(mc.vocab_size), static_cast<long long>(mc.embedding_dim),
      static_cast<long long>(mc.embedding_dim), static_cast<long long>(mc.hidden_size),
      static_cast<long long>(mc.hidden_size), static_cast<long long>(mc.num_classes),
      static_cast<long long>(count_parameters(*model)));
  if (o.ddp) {
    say(info, "rnn_dp: DistributedDataParallel over %d ranks (%s backend), each on %s with a batch of %lld%s\n",
        job.world, job.group->backend_name().c_str(), device0.str().c_str(), static_cast<long long>(rank_batch),
        o.zero ? ", Adam sharded by ZeroRedundancyOptimizer" : "");
  } else if (data_parallel) {
    say(info, "rnn_dp: DataParallel over %s: input scattered on dim %lld, lengths on dim 0, output gathered on dim "
        "%lld%s\n",
        join_devices(devices).c_str(), static_cast<long long>(batch_dim), static_cast<long long>(batch_dim),
        o.total_length ? "" : " (no total_length: expect the FAQ's failure)");
  } else {
    say(info, "rnn_dp: single device %s\n", device0.str().c_str());
  }
  if (o.uneven) {
    std::string counts;
    for (int r = 0; r < job.world; ++r) {
      const size_t n = ember::data::DistributedSampler(n_train, static_cast<size_t>(job.world), static_cast<size_t>(r),
                                                       sampler_options)
                           .size();
      counts += (r ? ", " : "") + std::to_string((n + static_cast<size_t>(rank_batch) - 1) / static_cast<size_t>(rank_batch));
    }
    say(info, "rnn_dp: --uneven: shards without padding, batches per rank %s; DistributedDataParallel::join lets "
        "the ranks that finish first shadow the others\n", counts.c_str());
  }
  say(info, "rnn_dp: batch %lld, Adam lr %g, seed %llu, %d DataLoader workers, %d thread%s per %s, batch_first=%s\n",
      static_cast<long long>(o.batch_size), o.lr, static_cast<unsigned long long>(o.seed), o.workers, threads,
      threads == 1 ? "" : "s", o.ddp ? "rank" : "device", o.batch_first ? "true" : "false");
  // --amp: autocast on device0's type around the forward and the loss (and the test pass).
  const std::optional<ember::DType> amp_dtype =
      o.amp.empty() ? std::nullopt : std::optional<ember::DType>(o.amp == "fp16" ? ember::kFloat16 : ember::kBFloat16);
  auto autocast_guard = [&] {
    return std::make_unique<ember::autocast>(device0.type, amp_dtype.value_or(ember::kBFloat16), amp_dtype.has_value());
  };
  if (amp_dtype) {
    say(info, "rnn_dp: mixed precision: autocast to %s on %s%s\n", o.amp.c_str(), device0.str().c_str(),
        optimizer.scaler().is_enabled() ? ", GradScaler (initial scale 65536)" : "");
  }

  ember_examples::TrainingObserver observer(o.observe, job.group, device0, "rnn_dp");
  std::vector<EpochResult> results;
  int64_t step = resumed.step;
  bool stopped = o.max_steps > 0 && step >= o.max_steps;  // --max-steps reached
  for (int epoch = start_epoch; epoch <= o.epochs && !stopped; ++epoch) {
    // See Note [Deterministic runs]; a resumed epoch goes on at its global sample (Note [Resume
    // at any world size]).
    const bool resumed_epoch = epoch == start_epoch;
    sampler->set_epoch(static_cast<uint64_t>(epoch - 1));
    if (resumed_epoch) sampler->set_start_index(resumed.samples);
    loader_generator->manual_seed(epoch_seed(o.seed, epoch) + static_cast<uint64_t>(job.rank));
    if (o.deterministic) {
      train_set->use_sample_streams(epoch_seed(o.seed, epoch));  // the same for every rank and worker
    } else {
      train_set->seed_rng(epoch_seed(o.seed, epoch) + static_cast<uint64_t>(job.rank));
    }
    // This epoch before this run (all ranks together): samples, and their loss summed.
    const size_t start_samples = resumed_epoch ? resumed.samples : 0;
    const double carried_loss = resumed_epoch ? resumed.loss_sum : 0.0;
    const double carried_seen = resumed_epoch ? resumed.seen : 0.0;

    model->train();
    EpochResult r;
    r.epoch = epoch;
    double loss_sum = 0.0;
    size_t seen = 0;
    int64_t epoch_steps = 0;
    ProgressBar bar("epoch " + std::to_string(epoch) + "/" + std::to_string(o.epochs), sampler->size(),
                    job.is_main() ? o.progress : ProgressMode::None);
    const auto t0 = Clock::now();
    auto train_pass = [&] {
      for (auto& [padded, lengths, labels] : loader) {
        observer.before_step(step + 1);
        const double loss_before = loss_sum;
        optimizer.zero_grad();
        // Where this batch's samples sit in the epoch's order (global positions; Note [Shard steps]).
        const uint64_t batch_start = start_samples + static_cast<uint64_t>(epoch_steps * o.batch_size);
        auto keep_for = [&](int64_t n, auto position_of) {
          if (o.dropout == 0.0) return Tensor();
          std::vector<uint64_t> positions(static_cast<size_t>(n));
          for (int64_t i = 0; i < n; ++i) positions[static_cast<size_t>(i)] = batch_start + position_of(i);
          return dropout_keep(o.seed, epoch, positions, mc.hidden_size, o.dropout);
        };
        auto shard_loss = [&](const Tensor& p, const Tensor& l, const Tensor& y, const Tensor& keep) {
          const auto amp = autocast_guard();
          const Tensor logits = train_logits(p, l, keep);
          return ember::nn::F::cross_entropy(logits, y.device() == logits.device() ? y : ember::to(y, logits.device()));
        };
        const size_t b = static_cast<size_t>(labels.size(0));
        if (dp_shards) {
          const Tensor keep = keep_for(o.batch_size, [](int64_t i) { return static_cast<uint64_t>(i); });
          const Tensor losses = [&] {
            const auto amp = autocast_guard();  // parallel_apply carries it to the replicas' threads
            return (*dp_shards)(padded, lengths, labels, keep);
          }();
          optimizer.scale(ember::sum(losses)).backward();
          for (double l : ember::to(losses, ember::kFloat64).to_vector<double>()) loss_sum += l * static_cast<double>(shard_rows);
        } else if (o.deterministic) {
          const int64_t time_dim = o.batch_first ? 1 : 0;
          for (int64_t j = 0; j < last_shard - first_shard; ++j) {
            const bool last = first_shard + j + 1 == last_shard;
            Tensor l = ember::narrow(lengths, 0, j * shard_rows, shard_rows);
            const auto lv = l.to_vector<int64_t>();
            const int64_t longest = *std::max_element(lv.begin(), lv.end());
            Tensor p = ember::contiguous(
                ember::narrow(ember::narrow(padded, batch_dim, j * shard_rows, shard_rows), time_dim, 0, longest));
            Tensor y = ember::narrow(labels, 0, j * shard_rows, shard_rows);
            const Tensor keep = keep_for(shard_rows, [&](int64_t i) { return static_cast<uint64_t>((first_shard + j) * shard_rows + i); });
            if (local_shards) {
              local_shards->set_sync(last);
              local_shards->prepare_for_backward(nullptr);
            }
            Tensor loss;
            if (ddp && !last) {
              auto no_sync = ddp->no_sync();
              loss = shard_loss(p, l, y, keep);
              optimizer.scale(loss).backward();
            } else {
              loss = shard_loss(p, l, y, keep);
              optimizer.scale(loss).backward();
            }
            loss_sum += loss.item() * static_cast<double>(shard_rows);
          }
        } else {
          // Rank r's i-th sample is position r + i * world of the global batch (DistributedSampler).
          const Tensor keep = keep_for(static_cast<int64_t>(b), [&](int64_t i) {
            return static_cast<uint64_t>(job.rank + i * job.world);
          });
          const Tensor loss = shard_loss(padded, lengths, labels, keep);
          optimizer.scale(loss).backward();
          loss_sum += loss.item() * static_cast<double>(b);
        }
        optimizer.step();
        if (o.trace_steps) {
          std::fprintf(out, "step-trace step=%lld slot=%d ranks=%d hash=%s t_ms=%.3f\n", static_cast<long long>(step),
                       job.rank, job.world, ember_examples::parameter_hash(*model).c_str(),
                       ember_examples::wall_ms());
          std::fflush(out);
        }
        seen += b;
        bar.update(seen, loss_sum / static_cast<double>(seen));
        ++step;
        ++epoch_steps;
        observer.after_step(step, (loss_sum - loss_before) / static_cast<double>(b),
                            static_cast<int64_t>(b) * job.world, o.lr, model->parameters());
        stopped = o.max_steps > 0 && step >= o.max_steps;
        if (stopped || (o.checkpoint_every > 0 && step % o.checkpoint_every == 0)) {
          // Every rank is at the same step (equal shards): the sums and --zero's consolidation are
          // collectives they all reach.
          const std::vector<double> so_far = job.sum({loss_sum, static_cast<double>(seen)});
          ResumePoint at;
          at.epochs_done = epoch - 1;
          at.samples = std::min(n_train, start_samples + static_cast<size_t>(epoch_steps * o.batch_size));
          at.loss_sum = carried_loss + so_far[0];
          at.seen = carried_seen + so_far[1];
          at.step = step;
          save_state(o, job, *model, optimizer, at, nullptr);
          job.barrier();  // the checkpoint is on disk before anyone goes on
          if (stopped) {
            say(info, "rnn_dp: stopped after step %lld (--max-steps), at sample %zu of epoch %d; checkpoint %s\n",
                static_cast<long long>(step), at.samples, epoch, last_checkpoint_path(o.checkpoint_dir).c_str());
            break;
          }
        }
      }
    };
    // --uneven: a rank out of batches shadows the others' collectives until all are done (Note
    // [Join] in parallel/distributed_data_parallel.cpp); every rank then has the same model.
    if (o.uneven) {
      ddp->join(train_pass);
    } else {
      train_pass();
    }
    r.epoch_s = std::chrono::duration<double>(Clock::now() - t0).count();
    bar.finish();
    if (stopped) break;

    const auto e0 = Clock::now();
    model->eval();
    int64_t correct = 0;
    {
      ember::NoGradGuard no_grad;
      const auto amp = autocast_guard();
      for (size_t i = static_cast<size_t>(job.rank); i < test_batches.size(); i += static_cast<size_t>(job.world)) {
        const auto& [padded, lengths, labels] = test_batches[i];
        const Tensor logits = eval_logits(padded, lengths);
        const Tensor pred = ember::argmax(logits, 1);
        const Tensor y = labels.device() == pred.device() ? labels : ember::to(labels, pred.device());
        correct += static_cast<int64_t>(ember::sum(ember::to(ember::eq(pred, y), ember::kInt64)).item());
      }
    }
    // The whole job's figures: sums over the ranks.
    const std::vector<double> totals =
        job.sum({loss_sum, static_cast<double>(seen), static_cast<double>(correct)});
    const double all_seen = carried_seen + totals[1];
    r.loss = all_seen > 0 ? (carried_loss + totals[0]) / all_seen : 0.0;
    r.samples = all_seen;
    r.samples_per_s = r.epoch_s > 0 ? totals[1] / r.epoch_s : 0.0;
    r.test_acc = n_test ? totals[2] / static_cast<double>(n_test) : 0.0;
    const double eval_s = std::chrono::duration<double>(Clock::now() - e0).count();

    ResumePoint end;
    end.epochs_done = epoch;
    end.step = step;
    save_state(o, job, *model, optimizer, end, &r);
    if (job.is_main()) append_metrics(o, job, r, devices, threads, eval_s, n_train, n_test);
    job.barrier();  // every rank goes on only once the checkpoint is on disk
    say(info, "epoch=%d loss=%.4f test_acc=%.4f epoch_s=%.2f samples_per_s=%.0f\n", r.epoch, r.loss, r.test_acc,
        r.epoch_s, r.samples_per_s);
    observer.epoch_end(step, {{"loss", r.loss}, {"test_accuracy", r.test_acc}, {"samples_per_s", r.samples_per_s}});
    results.push_back(r);
  }
  if (start_epoch > o.epochs) {
    say(info, "rnn_dp: nothing to do: the checkpoint already has %d of --epochs %d\n", start_epoch - 1, o.epochs);
  }
  job.barrier();  // rank 0 may host the store: nobody leaves before everyone is done with it
  return results;
}

}  // namespace rnn_dp
