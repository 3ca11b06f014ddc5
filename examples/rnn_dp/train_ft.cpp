// rnn_dp --ddp --ft: the training loop of a fault-tolerant job (parallel/ft/manager.h).

// Note [FT mode]
// Under `ember-run --ft`, every step is a transaction of an ft::Manager: start_quorum() says who
// takes part (the ranks alive now), should_commit() whether all of them finished the step.
//  - Step s is global batch s of Note [Shard steps]: epoch s / steps_per_epoch + 1, positions
//    [k * batch, (k + 1) * batch) of that epoch's one-replica order (k = s mod steps_per_epoch),
//    cut into --shards shards; rank r of the quorum's W ranks runs shards [r*S/W, (r+1)*S/W), each
//    its own forward and backward collated to its own longest word. A step dropped because a
//    rank died is redone by the survivors over the same global batch, so no sample is lost or
//    seen twice. With --deterministic, DistributedDataParallel's exact shard sum makes the
//    committed state the same bits as an undisturbed run at any world size; without it each
//    shard's loss is scaled by W / S so the ranks' average is the global batch's mean.
//  - The position in the data is the committed step count itself, so the state a replacement
//    receives (model, Adam's state, the CPU generator, the step) is all it needs; the sampler
//    state follows from the step.
//  - DistributedDataParallel is rebuilt over the manager's group whenever the quorum re-formed it.
//  - The quorum's rank 0 writes the checkpoint at the end (the same file as without --ft).
//  - --ft-fault SLOT:INCARNATION:STEP:POINT:SIGNAL[,...] (tests and ember-bench-ft;
//    examples/common/ft_job.h) makes that incarnation of that rank raise SIGNAL (KILL or STOP;
//    SLEEP<ms> sleeps instead, a straggler that lets a replacement catch up) on itself at STEP
//    (* for any), at POINT: forward
//    (before its first shard's forward), backward (before the backward that reduces), commit
//    (before should_commit), or loaded (right after it received a peer's state). It prints
//    "ft-fault: ..." with the wall-clock time in ms first.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "autograd/ops.h"
#include "core/error.h"
#include "core/generator.h"
#include "data/distributed_sampler.h"
#include "examples/common/distributed_job.h"
#include "examples/common/ft_job.h"
#include "examples/rnn_dp/model.h"
#include "examples/rnn_dp/train_detail.h"
#include "examples/rnn_dp/wordlang_dataset.h"
#include "nn/checkpoint.h"
#include "nn/functional.h"
#include "nn/optim/adam.h"
#include "parallel/distributed_data_parallel.h"
#include "parallel/ft/manager.h"

namespace rnn_dp {

namespace {

using ember::Tensor;
using ember_examples::say;
namespace ft = ember::parallel::ft;

}  // namespace

std::vector<EpochResult> train_ft(const Options& o, std::FILE* out) {
  const double started_ms = ember_examples::wall_ms();
  ember_examples::prepare_ft_rank(o.threads, o.deterministic);

  WordLangSplits splits = load_wordlang(o.dict_dir, o.limit);
  const size_t n_train = splits.train.size();
  WordLangDataset train_set(std::move(splits.train));
  const WordBatchCollate collate(o.batch_first);
  const int64_t steps_per_epoch = static_cast<int64_t>(n_train) / o.batch_size;
  EMBER_CHECK_T(ember::ValueError, steps_per_epoch > 0, "--ft: --batch-size ", o.batch_size, " is more than the ",
                n_train, " training words");
  const int64_t total = o.max_steps > 0 ? std::min<int64_t>(o.max_steps, o.epochs * steps_per_epoch)
                                        : o.epochs * steps_per_epoch;
  const int64_t shard_rows = o.batch_size / o.shards;

  ember::manual_seed(o.seed);
  const ModelConfig mc{
      .vocab_size = kVocabSize, .num_classes = kNumClasses, .batch_first = o.batch_first, .total_length = o.total_length};
  auto model = std::make_shared<WordLangModel>(mc);
  ember::optim::Adam adam(model->parameters(), ember::optim::AdamOptions(o.lr));

  ft::ManagerOptions mo = ember_examples::ft_manager_options(*model, adam, out);
  const int slot = mo.replica_id;
  const ember_examples::FtFaults faults(o.ft_fault, slot, mo.incarnation, out);
  auto fault = [&](const char* point, int64_t step) { faults.at(point, step); };

  const ember::parallel::DistributedDataParallelOptions ddpo{
      .timeout_ms = mo.timeout_ms, .deterministic = o.deterministic, .num_shards = o.shards};
  ft::Manager manager(mo);
  std::fprintf(out, "rnn_dp: --ft: rank slot %d (incarnation %lld, pid %d, started at %.3f ms) of at most %d, %lld "
               "steps of %lld words in %lld shards, ft timeout %lld ms\n",
               slot, static_cast<long long>(mo.incarnation), static_cast<int>(::getpid()),
               started_ms, mo.max_replicas,
               static_cast<long long>(total), static_cast<long long>(o.batch_size), static_cast<long long>(o.shards),
               static_cast<long long>(mo.timeout_ms));
  std::fflush(out);

  std::shared_ptr<ember::parallel::DistributedDataParallel<WordLangModel>> ddp;
  ember::data::DistributedSampler sampler(n_train, 1, 0, {.shuffle = true, .seed = o.seed});
  std::vector<size_t> order;
  int order_epoch = -1;
  double loss_sum = 0.0;  // this rank's shards of the committed steps of the current epoch
  while (manager.current_step() < total) {
    const double q0 = ember_examples::wall_ms();
    const bool ok = manager.start_quorum();
    double protocol_ms = ember_examples::wall_ms() - q0;  // time inside the manager this step
    if (manager.finished()) break;
    const int64_t step = manager.current_step();
    if (manager.recovered()) fault("loaded", step);
    adam.zero_grad();
    double step_loss = 0.0;
    if (ok) {
      try {
        if (!ddp || manager.group_changed()) {
          ddp = std::make_shared<ember::parallel::DistributedDataParallel<WordLangModel>>(
              model, manager.process_group(), ddpo);
        }
        const int epoch = static_cast<int>(step / steps_per_epoch) + 1;
        const int64_t k = step % steps_per_epoch;
        if (epoch != order_epoch) {
          sampler.set_epoch(static_cast<uint64_t>(epoch - 1));
          order = sampler.indices();
          order_epoch = epoch;
        }
        const int64_t world = manager.num_participants(), rank = manager.rank();
        const int64_t first = rank * o.shards / world, last = (rank + 1) * o.shards / world;
        for (int64_t j = first; j < last; ++j) {
          std::vector<std::pair<Tensor, int64_t>> samples;
          std::vector<uint64_t> positions;
          for (int64_t i = 0; i < shard_rows; ++i) {
            const uint64_t pos = static_cast<uint64_t>(k * o.batch_size + j * shard_rows + i);
            positions.push_back(pos);
            samples.push_back(train_set.get(order[pos]));
          }
          auto [padded, lengths, labels] = collate(std::move(samples));
          const Tensor keep =
              o.dropout > 0 ? detail::dropout_keep(o.seed, epoch, positions, mc.hidden_size, o.dropout) : Tensor();
          if (j == first) fault("forward", step);
          // All but the rank's last shard run forward and backward under no_sync().
          auto shard = [&] {
            Tensor loss = ember::nn::F::cross_entropy((*ddp)(padded, lengths, keep), labels);
            step_loss += loss.item() * static_cast<double>(shard_rows);
            if (!o.deterministic) loss = loss * (static_cast<double>(world) / static_cast<double>(o.shards));
            return loss;
          };
          if (j + 1 < last) {
            auto no_sync = ddp->no_sync();
            shard().backward();
          } else {
            Tensor loss = shard();
            fault("backward", step);
            loss.backward();
          }
        }
      } catch (const ember::Error& e) {
        manager.report_error(e.what());
      }
    }
    fault("commit", step);
    const double c0 = ember_examples::wall_ms();
    const bool commit = manager.should_commit();
    protocol_ms += ember_examples::wall_ms() - c0;
    if (!commit) continue;
    adam.step();
    loss_sum += step_loss;
    if (o.trace_steps) ember_examples::print_ft_step_trace(out, step, manager, *model, protocol_ms);
    if ((step + 1) % steps_per_epoch == 0 && manager.rank() == 0) {
      say(out, "rnn_dp: epoch %lld done at step %lld over %d rank(s); rank 0's shards' loss %.4f\n",
          static_cast<long long>((step + 1) / steps_per_epoch), static_cast<long long>(step + 1),
          manager.num_participants(),
          loss_sum / static_cast<double>(steps_per_epoch * o.batch_size / manager.num_participants()));
      loss_sum = 0.0;
    }
  }
  if (!manager.finished() && manager.rank() == 0) {
    std::filesystem::create_directories(o.checkpoint_dir);
    auto extra = detail::run_identity(o);
    extra["epoch"] = std::to_string(total / steps_per_epoch);
    extra["epoch_samples"] = std::to_string((total % steps_per_epoch) * o.batch_size);
    extra["epoch_loss_sum"] = "0";
    extra["epoch_seen"] = "0";
    extra["step"] = std::to_string(total);
    extra["world_size"] = std::to_string(manager.num_participants());
    const std::string path = detail::last_checkpoint_path(o.checkpoint_dir);
    ember::nn::save_checkpoint(path, *model, &adam, extra);
    say(out, "rnn_dp: stopped after step %lld over %d rank(s); checkpoint %s\n", static_cast<long long>(total),
        manager.num_participants(), path.c_str());
  }
  manager.finish();
  return {};
}

}  // namespace rnn_dp
