// word_lm --ddp --ft: the training loop of a fault-tolerant job (parallel/ft/manager.h).

// Note [word_lm --ft]
// Under `ember-run --ft`, every training chunk is a transaction of an ft::Manager, as in rnn_dp's
// loop (Note [FT mode] in examples/rnn_dp/train_ft.cpp):
//  - step s is chunk s mod C of epoch s / C + 1 (C chunks an epoch); its --batch-size streams are
//    the --shards shards of Note [word_lm shards], and rank r of the quorum's W ranks runs shards
//    [r*S/W, (r+1)*S/W), each its own forward and backward, dropout seeded by (seed, epoch,
//    chunk, shard). With --deterministic, DistributedDataParallel's exact shard sum makes the
//    committed state the same bits as the one-process --deterministic run at any world size;
//    without it each shard's loss is scaled by W / S so the ranks' average is the chunk's mean.
//  - each shard carries its LSTM state from chunk to chunk, and the rank that holds a shard may
//    change with the quorum: so every rank keeps every shard's state. After the backward the
//    ranks all-gather their shards' new states (and losses); a committed step adopts them, a
//    dropped one keeps the old ones, so a redone chunk starts from the same states.
//  - after the last chunk of an epoch every rank evaluates all validation and test streams and
//    anneals the learning rate alike; the quorum's rank 0 prints the epoch's line.
//  - a replacement receives the model, the optimizer state, the generator, the step, every
//    shard's state, the learning rate, the best validation loss and the epoch's loss sums.
//  - the quorum's rank 0 writes last.safetensors at the end (the model and optimizer, as the
//    --deterministic --max-steps checkpoint holds them).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <thread>

#include "autograd/ops.h"
#include "core/error.h"
#include "core/generator.h"
#include "examples/common/distributed_job.h"
#include "examples/common/ft_job.h"
#include "examples/word_lm/corpus.h"
#include "examples/word_lm/train_detail.h"
#include "nn/checkpoint.h"
#include "nn/functional.h"
#include "nn/optim/sgd.h"
#include "nn/utils/clip_grad.h"
#include "parallel/distributed_data_parallel.h"
#include "parallel/ft/manager.h"

namespace word_lm {

namespace {

using ember::Tensor;
using ember_examples::say;
namespace ft = ember::parallel::ft;

// What the loop carries from step to step besides the model and the optimizer.
struct LoopState {
  Tensor hidden;  // [2, nlayers, batch, nhid]: h and c of every stream
  double lr = 0.0;
  double best_val = std::numeric_limits<double>::infinity();
  double loss_sum = 0.0, loss_count = 0.0;  // the epoch's shard losses so far
};

}  // namespace

std::vector<EpochResult> train_ft(const Options& o, std::FILE* out) {
  const double started_ms = ember_examples::wall_ms();
  ember_examples::prepare_ft_rank(o.threads, o.deterministic);

  const detail::Corpus corpus = detail::load_corpus(o, nullptr);
  const Tensor train_data = batchify(corpus.train, o.batch_size, 0, o.batch_size);
  const Tensor valid_data = batchify(corpus.valid, o.eval_batch_size, 0, o.eval_batch_size);
  const Tensor test_data = batchify(corpus.test, o.eval_batch_size, 0, o.eval_batch_size);
  const int64_t chunks = (train_data.size(0) - 1 + o.bptt - 1) / o.bptt;
  const int64_t total = o.max_steps > 0 ? std::min<int64_t>(o.max_steps, o.epochs * chunks) : o.epochs * chunks;
  const int64_t width = o.batch_size / o.shards;

  ember::manual_seed(o.seed);
  const ModelConfig mc = detail::model_config(o, corpus.ntoken);
  auto model = std::make_shared<RNNModel>(mc);
  ember::optim::SGD optimizer(model->parameters(), ember::optim::SGDOptions(o.lr));
  const auto zero_hidden = [&] {
    return ember::zeros({2, mc.nlayers, o.batch_size, mc.nhid}, ember::TensorOptions(ember::kFloat32));
  };
  LoopState st;
  st.hidden = zero_hidden();
  st.lr = o.lr;

  ember_examples::FtExtraState extra;
  extra.save = [&](ft::StateDict& s) {
    s.tensors.emplace_back("loop.hidden", st.hidden);
    s.metadata["loop.lr"] = detail::fmt(st.lr);
    s.metadata["loop.best_val"] = detail::fmt(st.best_val);
    s.metadata["loop.loss_sum"] = detail::fmt(st.loss_sum);
    s.metadata["loop.loss_count"] = detail::fmt(st.loss_count);
  };
  extra.load = [&](const ft::StateDict& s) {
    for (const auto& [name, t] : s.tensors)
      if (name == "loop.hidden") st.hidden = ember::contiguous(t);
    st.lr = std::stod(s.metadata.at("loop.lr"));
    st.best_val = std::stod(s.metadata.at("loop.best_val"));
    st.loss_sum = std::stod(s.metadata.at("loop.loss_sum"));
    st.loss_count = std::stod(s.metadata.at("loop.loss_count"));
  };
  ft::ManagerOptions mo = ember_examples::ft_manager_options(*model, optimizer, out, extra);
  const int slot = mo.replica_id;
  const ember_examples::FtFaults faults(o.ft_fault, slot, mo.incarnation, out);

  const ember::parallel::DistributedDataParallelOptions ddpo{
      .timeout_ms = mo.timeout_ms, .deterministic = o.deterministic, .num_shards = o.shards};
  ft::Manager manager(mo);
  std::fprintf(out, "word_lm: --ft: rank slot %d (incarnation %lld, pid %d, started at %.3f ms) of at most %d, %lld "
               "steps (%lld chunks an epoch) of %lld streams in %lld shards, ft timeout %lld ms\n",
               slot, static_cast<long long>(mo.incarnation), static_cast<int>(::getpid()), started_ms,
               mo.max_replicas, static_cast<long long>(total), static_cast<long long>(chunks),
               static_cast<long long>(o.batch_size), static_cast<long long>(o.shards),
               static_cast<long long>(mo.timeout_ms));
  std::fflush(out);

  std::shared_ptr<ember::parallel::DistributedDataParallel<RNNModel>> ddp;
  const std::vector<Tensor> params = model->parameters();
  std::vector<EpochResult> results;
  while (manager.current_step() < total) {
    const double q0 = ember_examples::wall_ms();
    const bool ok = manager.start_quorum();
    double protocol_ms = ember_examples::wall_ms() - q0;
    if (manager.finished()) break;
    const int64_t step = manager.current_step();
    if (manager.recovered()) faults.at("loaded", step);
    const int epoch = static_cast<int>(step / chunks) + 1;
    const int64_t c = step % chunks, i = c * o.bptt, len = std::min(o.bptt, train_data.size(0) - 1 - i);
    optimizer.zero_grad();
    model->train();
    Tensor next_hidden;  // every shard's state after this chunk, once the ranks exchanged theirs
    double chunk_loss_sum = 0.0;
    if (ok) {
      try {
        if (!ddp || manager.group_changed())
          ddp = std::make_shared<ember::parallel::DistributedDataParallel<RNNModel>>(model, manager.process_group(),
                                                                                      ddpo);
        const int64_t world = manager.num_participants(), rank = manager.rank();
        const int64_t first = rank * o.shards / world, last = (rank + 1) * o.shards / world;
        Tensor mine = zero_hidden();  // this rank's shards' new states; zeros elsewhere
        Tensor losses = ember::zeros({o.shards}, ember::TensorOptions(ember::kFloat64));
        for (int64_t j = first; j < last; ++j) {
          const Tensor x = ember::contiguous(ember::narrow(ember::narrow(train_data, 0, i, len), 1, j * width, width));
          const Tensor y = ember::reshape(
              ember::contiguous(ember::narrow(ember::narrow(train_data, 0, i + 1, len), 1, j * width, width)), {-1});
          const Tensor cols = ember::narrow(st.hidden, 2, j * width, width);
          const RNNModel::State h{ember::contiguous(ember::select(cols, 0, 0)),
                                  ember::contiguous(ember::select(cols, 0, 1))};
          ember::manual_seed(detail::shard_seed(o.seed, epoch, c, j));
          if (j == first) faults.at("forward", step);
          auto run = [&](bool reduce) {
            auto [logits, next] = (*ddp)(x, h);
            Tensor loss = ember::nn::F::cross_entropy(logits, y);
            const double value = loss.item();
            if (!o.deterministic) loss = loss * (static_cast<double>(world) / static_cast<double>(o.shards));
            if (reduce) faults.at("backward", step);
            loss.backward();
            mine.narrow(2, j * width, width)
                .copy_(ember::stack({std::get<0>(next).detach(), std::get<1>(next).detach()}, 0));
            losses.data_ptr<double>()[j] = value;
          };
          if (j + 1 < last) {
            auto no_sync = ddp->no_sync();
            run(false);
          } else {
            run(true);
          }
        }
        // Every rank's shards' states and losses to every rank (Note [word_lm --ft]).
        auto group = manager.process_group();
        std::vector<Tensor> states, shard_losses;
        for (int64_t q = 0; q < world; ++q) {
          states.push_back(ember::empty_like(mine));
          shard_losses.push_back(ember::empty_like(losses));
        }
        group->all_gather(states, mine)->wait(mo.timeout_ms);
        group->all_gather(shard_losses, losses)->wait(mo.timeout_ms);
        std::vector<Tensor> parts;
        for (int64_t q = 0; q < world; ++q) {
          const int64_t a = q * o.shards / world, b = (q + 1) * o.shards / world;
          if (b > a) parts.push_back(ember::narrow(states[static_cast<size_t>(q)], 2, a * width, (b - a) * width));
          for (int64_t j = a; j < b; ++j) chunk_loss_sum += shard_losses[static_cast<size_t>(q)].data_ptr<double>()[j];
        }
        next_hidden = ember::contiguous(ember::cat(parts, 2));
      } catch (const ember::Error& e) {
        manager.report_error(e.what());
      }
    }
    faults.at("commit", step);
    const double c0 = ember_examples::wall_ms();
    const bool commit = manager.should_commit();
    protocol_ms += ember_examples::wall_ms() - c0;
    if (!commit) continue;
    optimizer.param_groups()[0].options().set_lr(st.lr);
    ember::nn::utils::clip_grad_norm_(params, o.clip);
    optimizer.step();
    st.hidden = next_hidden;
    st.loss_sum += chunk_loss_sum;
    st.loss_count += static_cast<double>(o.shards);
    if (o.trace_steps) ember_examples::print_ft_step_trace(out, step, manager, *model, protocol_ms);
    if (c + 1 < chunks) continue;
    // The epoch's end: every rank evaluates every stream, so the annealing is the same everywhere.
    EpochResult r;
    r.epoch = epoch;
    r.lr = st.lr;
    r.train_loss = st.loss_sum / st.loss_count;
    const auto [val_sum, val_n] = detail::evaluate(*model, valid_data, o.bptt);
    const auto [test_sum, test_n] = detail::evaluate(*model, test_data, o.bptt);
    r.val_loss = val_sum / val_n;
    r.test_loss = test_sum / test_n;
    const bool best = r.val_loss < st.best_val;
    if (best) {
      st.best_val = r.val_loss;
    } else {
      st.lr /= 4.0;
    }
    st.hidden = zero_hidden();
    st.loss_sum = st.loss_count = 0.0;
    if (manager.rank() == 0)
      say(out, "epoch=%d lr=%g train_loss=%.4f train_ppl=%.2f val_loss=%.4f val_ppl=%.2f test_loss=%.4f "
               "test_ppl=%.2f over %d rank(s)%s\n",
          epoch, r.lr, r.train_loss, std::exp(r.train_loss), r.val_loss, std::exp(r.val_loss), r.test_loss,
          std::exp(r.test_loss), manager.num_participants(), best ? "" : " (no improvement: lr / 4)");
    results.push_back(r);
  }
  if (!manager.finished() && manager.rank() == 0) {
    std::filesystem::create_directories(o.checkpoint_dir);
    auto identity = detail::run_identity(o, manager.num_participants(), mc.ntoken);
    identity["step"] = std::to_string(total);
    identity["next_lr"] = detail::fmt(st.lr);
    identity["best_val_loss"] = detail::fmt(st.best_val);
    const std::string path = detail::last_checkpoint_path(o.checkpoint_dir);
    ember::nn::save_checkpoint(path, *model, &optimizer, identity);
    say(out, "word_lm: stopped after step %lld over %d rank(s); checkpoint %s\n", static_cast<long long>(total),
        manager.num_participants(), path.c_str());
  }
  manager.finish();
  return results;
}

}  // namespace word_lm
