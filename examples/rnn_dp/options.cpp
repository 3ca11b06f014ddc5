#include "examples/rnn_dp/options.h"

#include "core/error.h"
#include "examples/common/cli.h"

namespace rnn_dp {

namespace {

using ember::ValueError;
using ember_examples::parse_bool;
using ember_examples::parse_double;
using ember_examples::parse_int;

std::vector<ember::Device> parse_devices(const std::string& flag, const std::string& v) {
  std::vector<ember::Device> out;
  size_t start = 0;
  while (start <= v.size()) {
    const size_t comma = v.find(',', start);
    const std::string item = v.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    EMBER_CHECK_T(ValueError, !item.empty(), flag, ": empty device in '", v, "' (expected e.g. cpu:0,cpu:1)");
    out.emplace_back(item);  // ember::Device throws ValueError for a bad spec
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

std::string usage() {
  return R"(usage: rnn_dp [options]
Trains the PyTorch FAQ's pack -> LSTM -> unpack model (Embedding(257, 32) -> LSTM(32, 128) ->
mean over valid positions -> Linear(128, 6)) to tell the language of a word, under DataParallel (or DistributedDataParallel with --ddp).

  --epochs N            epochs to train (default 3)
  --devices LIST        comma-separated devices (default: all CUDA GPUs, else cpu:0,cpu:1)
  --single-device       no DataParallel: train on the first device only
  --ddp                 DistributedDataParallel, one rank per process: run under
                        `ember-run --nproc-per-node N` or `mpirun -np N`; --batch-size is
                        the global batch (each rank takes batch/N), rank 0 prints and
                        checkpoints
  --backend NAME        --ddp: tcp | mpi | nccl (default: nccl with GPUs, under mpirun
                        too; else mpi under mpirun, tcp otherwise)
  --timeout S           --ddp: seconds any collective may take before it fails (default 300)
  --zero                --ddp: shard Adam's state over the ranks (ZeroRedundancyOptimizer);
                        checkpoints hold it whole, so they resume with or without --zero
  --uneven              --ddp: shard the data without padding (each word once per epoch), so
                        ranks may get different numbers of batches; the training loop runs
                        inside DistributedDataParallel::join (PyTorch's ddp.join())
  --workers N           forked DataLoader workers (default 2; 0 loads in the main process)
  --threads N           intra-op threads per device (default: cores / devices, at least 1);
                        the pool is process-wide, a replica finding it busy computes inline
  --batch-size N        training batch (default 64)
  --lr X                Adam learning rate (default 0.003)
  --seed N              seed of initialization, shuffling and workers (default 0)
  --limit N             N train and N test words per language, spread evenly over each split
  --batch-first B       true: input [B x T]; false: [T x B], scattered on dim 1 (default true)
  --no-total-length     unpack without total_length: DataParallel then fails, as in the FAQ
  --augment P           drop one random byte of a training word with probability P (default 0)
  --dropout P           dropout on the pooled LSTM features (default 0); each sample's mask
                        comes from the seed and its global position, not from the rank
  --deterministic       world-size-invariant training: each global batch is --shards shards,
                        each its own forward/backward, gradients summed exactly; the same
                        bits at any number of ranks, devices, threads and workers
                        (docs/DETERMINISM.md)
  --shards N            --deterministic: virtual shards per global batch (default 8)
  --amp DTYPE           mixed precision: bf16 | fp16 (autocast on the training device; fp16 adds a
                        dynamic loss scale, GradScaler, whose skipped steps every --ddp rank shares)
  --resume              continue from the last checkpoint in --checkpoint-dir, on any number
                        of ranks (or none): the same global sample order goes on
  --checkpoint-every N  also write the last checkpoint every N training steps (mid-epoch)
  --max-steps N         stop after N training steps in all, writing a checkpoint there
  --checkpoint-dir DIR  one checkpoint per epoch (default runs/rnn_dp/checkpoints)
  --metrics PATH        JSON lines, one per epoch, appended (default runs/rnn_dp/metrics.jsonl)
  --dict-dir DIR        where the word lists are (default /usr/share/dict)
  --progress MODE       auto | tty | lines | none (default auto: a bar on a terminal, else lines)
  --help                this text
)";
}

Options parse_options(int argc, const char* const* argv) {
  Options o;
  const ember_examples::JobFlags job{o.ddp, o.backend, o.timeout_s, o.seed, o.threads, o.resume};
  for (ember_examples::ArgReader args(argc, argv); args.next();) {
    if (ember_examples::parse_job_flag(args, job)) continue;
    const std::string& arg = args.flag();
    auto take = [&]() -> const std::string& { return args.value(); };
    auto no_value = [&] { args.no_value(); };

    if (arg == "--help" || arg == "-h") {
      no_value();
      o.help = true;
    } else if (arg == "--epochs") {
      o.epochs = static_cast<int>(parse_int(arg, take(), 1));
    } else if (arg == "--devices") {
      o.devices = parse_devices(arg, take());
    } else if (arg == "--single-device") {
      no_value();
      o.single_device = true;
    } else if (arg == "--zero") {
      no_value();
      o.zero = true;
    } else if (arg == "--uneven") {
      no_value();
      o.uneven = true;
    } else if (arg == "--checkpoint-every") {
      o.checkpoint_every = parse_int(arg, take(), 1);
    } else if (arg == "--max-steps") {
      o.max_steps = parse_int(arg, take(), 1);
    } else if (arg == "--workers") {
      o.workers = static_cast<int>(parse_int(arg, take(), 0));
    } else if (arg == "--batch-size") {
      o.batch_size = parse_int(arg, take(), 1);
    } else if (arg == "--eval-batch-size") {
      o.eval_batch_size = parse_int(arg, take(), 1);
    } else if (arg == "--lr") {
      o.lr = parse_double(arg, take());
      EMBER_CHECK_T(ValueError, o.lr > 0, arg, ": expected a positive learning rate, got ", o.lr);
    } else if (arg == "--limit") {
      o.limit = static_cast<size_t>(parse_int(arg, take(), 1));
    } else if (arg == "--batch-first") {
      o.batch_first = parse_bool(arg, take());
    } else if (arg == "--no-total-length") {
      no_value();
      o.total_length = false;
    } else if (arg == "--augment") {
      o.augment_p = parse_double(arg, take());
      EMBER_CHECK_T(ValueError, o.augment_p >= 0 && o.augment_p <= 1, arg, ": expected a probability, got ",
                    o.augment_p);
    } else if (arg == "--dropout") {
      o.dropout = parse_double(arg, take());
      EMBER_CHECK_T(ValueError, o.dropout >= 0 && o.dropout < 1, arg, ": expected a probability below 1, got ",
                    o.dropout);
    } else if (arg == "--deterministic") {
      no_value();
      o.deterministic = true;
    } else if (arg == "--shards") {
      o.shards = parse_int(arg, take(), 1);
    } else if (arg == "--amp") {
      o.amp = take();
      EMBER_CHECK_T(ValueError, o.amp == "bf16" || o.amp == "fp16", arg, ": expected bf16 or fp16, got '", o.amp,
                    "'");
    } else if (arg == "--checkpoint-dir") {
      o.checkpoint_dir = take();
    } else if (arg == "--metrics") {
      o.metrics_path = take();
    } else if (arg == "--dict-dir") {
      o.dict_dir = take();
    } else if (arg == "--progress") {
      o.progress = progress_mode_from_string(take());
    } else {
      EMBER_THROW(ValueError, "unknown option '", args.raw(), "' (see --help)");
    }
  }
  if (o.ddp) {
    EMBER_CHECK_T(ValueError, o.devices.empty() && !o.single_device,
                  "--ddp: each rank trains on one device of its own (cuda:LOCAL_RANK, else cpu:0); drop --devices "
                  "and --single-device");
  } else {
    EMBER_CHECK_T(ValueError, o.backend.empty(), "--backend applies only with --ddp");
    EMBER_CHECK_T(ValueError, !o.zero, "--zero applies only with --ddp (it shards over the ranks)");
    EMBER_CHECK_T(ValueError, !o.uneven, "--uneven applies only with --ddp (it shards over the ranks)");
  }
  // The GradScaler unscales one whole optimizer and all-reduces its overflow flag at every step.
  EMBER_CHECK_T(ValueError, o.amp != "fp16" || (!o.zero && !o.uneven),
                "--amp fp16: its GradScaler needs the whole optimizer and a collective at every step, which --zero "
                "and --uneven do not give; use --amp bf16 there");
  if (o.uneven) {
    // A rank that has joined takes no more steps: collectives at a step count (ZeRO's step, the
    // checkpoints within an epoch) would wait for it.
    EMBER_CHECK_T(ValueError, !o.zero && o.checkpoint_every == 0 && o.max_steps == 0,
                  "--uneven: ranks take different numbers of steps, which --zero, --checkpoint-every and "
                  "--max-steps need to be the same; drop them");
  }
  if (o.deterministic) {
    EMBER_CHECK_T(ValueError, o.batch_size % o.shards == 0, "--deterministic: --batch-size ", o.batch_size,
                  " must be a multiple of --shards ", o.shards, " (every shard holds the same number of samples)");
    EMBER_CHECK_T(ValueError, o.augment_p == 0 && o.amp.empty() && !o.uneven,
                  "--deterministic: --augment (per-worker streams), --amp and --uneven are not supported with it");
  }
  return o;
}

}  // namespace rnn_dp
