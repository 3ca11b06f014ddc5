// Options of the rnn_dp example and their command line (CLI11, examples/common/cli.h: --flag
// value or --flag=value; the usage is generated from the flags). Value type.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"
#include "examples/common/observe.h"
#include "examples/common/progress.h"

namespace rnn_dp {

using ember_examples::ProgressMode;
using ember_examples::progress_mode_from_string;

struct Options {
  int epochs = 3;
  std::vector<ember::Device> devices;  // empty: parallel::default_data_parallel_devices()
  int workers = 2;
  int64_t batch_size = 64;
  int64_t eval_batch_size = 256;
  double lr = 3e-3;
  uint64_t seed = 0;
  std::optional<size_t> limit;  // first N train and N test words per language
  int threads = 0;              // intra-op threads per device; 0: cores / devices (at least 1).
                                // ember::set_num_threads(threads): see Note [Thread pool concurrency]
  bool batch_first = true;
  bool total_length = true;     // false: --no-total-length (the FAQ's failure under DataParallel)
  bool resume = false;
  bool single_device = false;   // no DataParallel: the model on devices[0]
  bool ddp = false;             // DistributedDataParallel: one rank per process (ember-run, mpirun)
  std::string backend;          // --ddp: tcp | mpi | nccl; empty: default_ddp_backend (train.h)
  int64_t timeout_s = 300;      // --ddp: bound on every collective and the rendezvous
  bool zero = false;            // --ddp: ZeroRedundancyOptimizer (each rank keeps 1/N of Adam's state)
  bool uneven = false;          // --ddp: shards without padding, training inside DistributedDataParallel::join
  int64_t checkpoint_every = 0; // also checkpoint every N training steps (0: at epoch ends only)
  int64_t max_steps = 0;        // stop after N training steps in all (checkpointed there); 0: no limit
  double augment_p = 0.0;       // probability of dropping one byte of a training word
  double dropout = 0.0;         // on the pooled features; masks from (seed, global sample): Note [Shard steps]
  bool deterministic = false;   // the same bits at any world size (Note [Shard steps] in train.cpp)
  int64_t shards = 8;           // --deterministic: virtual shards per global batch
  bool ft = false;              // --ddp under ember-run --ft: outlive a dead rank (Note [FT mode] in train_ft.cpp)
  bool trace_steps = false;     // --ddp: every rank prints its parameters' hash after every step
  std::string ft_fault;         // --ft: test-only fault injection (Note [FT mode])
  std::string amp;              // --amp: "bf16" | "fp16" (autocast; fp16 adds a GradScaler); empty: float32
  std::string metrics_path = "runs/rnn_dp/metrics.jsonl";
  std::string checkpoint_dir = "runs/rnn_dp/checkpoints";
  std::string dict_dir = "/usr/share/dict";
  ProgressMode progress = ProgressMode::Auto;
  ember_examples::ObserveFlags observe;  // --tensorboard, --profile, --profile-steps
  bool help = false;
};

/// Parses argv[1..]; --help sets `help` and checks nothing else. Throws ember::ValueError naming
/// the flag for an unknown flag, a missing or malformed value, a value out of range, or a
/// combination that cannot work.
Options parse_options(int argc, const char* const* argv);

/// The --help text, generated from the flags.
std::string usage();

}  // namespace rnn_dp
