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
//  - --ft-fault SLOT:INCARNATION:STEP:POINT:SIGNAL[,...] (tests and ember-bench-ft) makes that
//    incarnation of that rank raise SIGNAL (KILL or STOP; SLEEP<ms> sleeps instead, a straggler
//    that lets a replacement catch up) on itself at STEP (* for any), at POINT: forward
//    (before its first shard's forward), backward (before the backward that reduces), commit
//    (before should_commit), or loaded (right after it received a peer's state). It prints
//    "ft-fault: ..." with the wall-clock time in ms first.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "autograd/ops.h"
#include "core/cpu_affinity.h"
#include "core/deterministic.h"
#include "core/env.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/thread_pool.h"
#include "data/distributed_sampler.h"
#include "examples/common/distributed_job.h"
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

struct Fault {
  int slot = -1;
  int64_t incarnation = 0;
  int64_t step = 0;
  std::string point;
  int signo = SIGKILL;
  int64_t sleep_ms = 0;  // SLEEP<ms>: a straggler instead of a signal
};

std::vector<Fault> parse_faults(const std::string& spec) {
  std::vector<Fault> out;
  size_t start = 0;
  while (start < spec.size()) {
    size_t comma = spec.find(',', start);
    if (comma == std::string::npos) comma = spec.size();
    const std::string item = spec.substr(start, comma - start);
    std::vector<std::string> f;
    size_t a = 0;
    for (size_t b; (b = item.find(':', a)) != std::string::npos; a = b + 1) f.push_back(item.substr(a, b - a));
    f.push_back(item.substr(a));
    EMBER_CHECK_T(ember::ValueError, f.size() == 5, "--ft-fault: expected SLOT:INCARNATION:STEP:POINT:SIGNAL, got '",
                  item, "'");
    Fault x;
    x.slot = std::stoi(f[0]);
    x.incarnation = std::stoll(f[1]);
    x.step = f[2] == "*" ? -1 : std::stoll(f[2]);
    x.point = f[3];
    EMBER_CHECK_T(ember::ValueError,
                  x.point == "forward" || x.point == "backward" || x.point == "commit" || x.point == "loaded",
                  "--ft-fault: POINT is forward, backward, commit or loaded; got '", x.point, "'");
    if (f[4].rfind("SLEEP", 0) == 0) {
      x.signo = 0;
      x.sleep_ms = std::stoll(f[4].substr(5));
    } else {
      EMBER_CHECK_T(ember::ValueError, f[4] == "KILL" || f[4] == "STOP",
                    "--ft-fault: SIGNAL is KILL, STOP or SLEEP<ms>; got '", f[4], "'");
      x.signo = f[4] == "KILL" ? SIGKILL : SIGSTOP;
    }
    out.push_back(x);
    start = comma + 1;
  }
  return out;
}

std::string to_hex(const std::vector<uint8_t>& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : bytes) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

std::vector<uint8_t> from_hex(const std::string& s) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < s.size(); i += 2) out.push_back(static_cast<uint8_t>(std::stoi(s.substr(i, 2), nullptr, 16)));
  return out;
}

}  // namespace

std::vector<EpochResult> train_ft(const Options& o, std::FILE* out) {
  const double started_ms = detail::wall_ms();
  EMBER_CHECK_T(ember::ValueError, ft::enabled_by_environment(),
                "--ft: run the ranks under `ember-run --ft --nproc-per-node N ...` (EMBER_FT is not set)");
  ft::ManagerOptions mo = ft::options_from_environment();
  const int slot = mo.replica_id;
  const std::vector<Fault> faults = parse_faults(o.ft_fault);
  auto fault = [&](const std::string& point, int64_t step) {
    for (const Fault& f : faults) {
      if (f.slot != slot || f.incarnation != mo.incarnation || (f.step >= 0 && f.step != step) || f.point != point) continue;
      if (f.signo == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(f.sleep_ms));
        continue;
      }
      std::fprintf(out, "ft-fault: slot %d raising SIG%s at step %lld (%s) at %.3f ms\n", slot,
                   f.signo == SIGKILL ? "KILL" : "STOP", static_cast<long long>(step), point.c_str(),
                   detail::wall_ms());
      std::fflush(out);
      ::raise(f.signo);
    }
  };

  const int local_world = static_cast<int>(ember::env::integer("LOCAL_WORLD_SIZE", 1, 1 << 24).value_or(1));
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads =
      o.threads > 0 ? o.threads : std::max(1, std::min(ember::available_cpu_count(), cores / local_world));
  ember::set_num_threads(threads);
  if (o.deterministic) ember::use_deterministic_algorithms(true);

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
  ModelConfig mc;
  mc.num_classes = kNumClasses;
  mc.vocab_size = kVocabSize;
  mc.batch_first = o.batch_first;
  mc.total_length = o.total_length;
  auto model = std::make_shared<WordLangModel>(mc);
  ember::optim::Adam adam(model->parameters(), ember::optim::AdamOptions(o.lr));

  mo.state_dict = [&] {
    ft::StateDict s;
    for (const auto& [k, t] : model->state_dict()) s.tensors.emplace_back("model." + k, t);
    for (const auto& [idx, state] : adam.state_dict().state)
      for (const auto& [k, t] : state) s.tensors.emplace_back("optim." + std::to_string(idx) + "." + k, t);
    s.metadata["rng.cpu"] = to_hex(ember::default_generator().get_state());
    return s;
  };
  mo.load_state_dict = [&](const ft::StateDict& s) {
    ember::nn::StateDict msd;
    ember::optim::OptimizerStateDict osd = adam.state_dict();
    osd.state.clear();
    for (const auto& [name, t] : s.tensors) {
      if (name.rfind("model.", 0) == 0) {
        msd.emplace_back(name.substr(6), t);
      } else if (name.rfind("optim.", 0) == 0) {
        const size_t dot = name.find('.', 6);
        EMBER_CHECK_T(ember::ValueError, dot != std::string::npos, "--ft: a peer sent state '", name, "'");
        osd.state[std::stoll(name.substr(6, dot - 6))][name.substr(dot + 1)] = t;
      }
    }
    model->load_state_dict(msd);
    adam.load_state_dict(osd);
    ember::default_generator().set_state(from_hex(s.metadata.at("rng.cpu")));
  };
  mo.log = [out](const std::string& line) {
    std::fprintf(out, "%s\n", line.c_str());
    std::fflush(out);
  };

  ember::parallel::DistributedDataParallelOptions ddpo;
  ddpo.timeout_ms = mo.timeout_ms;
  ddpo.deterministic = o.deterministic;
  ddpo.num_shards = o.shards;
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
    const double q0 = detail::wall_ms();
    const bool ok = manager.start_quorum();
    double protocol_ms = detail::wall_ms() - q0;  // time inside the manager this step
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
    const double c0 = detail::wall_ms();
    const bool commit = manager.should_commit();
    protocol_ms += detail::wall_ms() - c0;
    if (!commit) continue;
    adam.step();
    loss_sum += step_loss;
    if (o.trace_steps) {
      std::fprintf(out, "step-trace step=%lld slot=%d ranks=%d hash=%s t_ms=%.3f ft_ms=%.3f\n",
                   static_cast<long long>(step), slot, manager.num_participants(),
                   detail::parameter_hash(*model).c_str(), detail::wall_ms(), protocol_ms);
      std::fflush(out);
    }
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
