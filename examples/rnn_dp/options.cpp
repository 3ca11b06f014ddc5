#include "examples/rnn_dp/options.h"

#include "core/error.h"
#include "examples/common/cli.h"

namespace rnn_dp {

namespace {

using ember::ValueError;
using ember::cli::at_least;
using ember::cli::number_in;
using ember::cli::one_of;

std::vector<ember::Device> parse_devices(const std::string& v) {
  std::vector<ember::Device> out;
  size_t start = 0;
  while (start <= v.size()) {
    const size_t comma = v.find(',', start);
    const std::string item = v.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    EMBER_CHECK_T(ValueError, !item.empty(), "--devices: empty device in '", v, "' (expected e.g. cpu:0,cpu:1)");
    out.emplace_back(item);  // ember::Device throws ValueError for a bad spec
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// The command line: every flag, its value's check and its help line. Writes into `o`.
std::unique_ptr<CLI::App> command_line(Options& o) {
  auto app = ember::cli::make_app(
      "rnn_dp",
      "Trains the PyTorch FAQ's pack -> LSTM -> unpack model (Embedding(257, 32) -> LSTM(32, 128) -> mean over "
      "valid positions -> Linear(128, 6)) to tell the language of a word, under DataParallel (or "
      "DistributedDataParallel with --ddp).");
  auto& a = *app;
  a.add_option("--epochs", o.epochs, "epochs to train")->check(at_least(1))->type_name("N");
  a.add_option_function<std::string>(
       "--devices", [&o](const std::string& v) { o.devices = parse_devices(v); },
       "comma-separated devices (default: all CUDA GPUs, else cpu:0,cpu:1)")
      ->type_name("LIST");
  a.add_flag("--single-device", o.single_device, "no DataParallel: train on the first device only")
      ->disable_flag_override();
  ember_examples::add_job_flags(a, {o.ddp, o.backend, o.timeout_s, o.seed, o.threads, o.resume},
                                "nccl with GPUs, under mpirun too; else mpi under mpirun, tcp otherwise");
  a.get_option("--threads")
      ->description("intra-op threads per device (default: cores / devices, at least 1); the pool is "
                    "process-wide, a replica finding it busy computes inline")
      ->default_str("");
  a.add_flag("--zero", o.zero,
             "--ddp: shard Adam's state over the ranks (ZeroRedundancyOptimizer); checkpoints hold it whole, so "
             "they resume with or without --zero")
      ->disable_flag_override();
  a.add_flag("--uneven", o.uneven,
             "--ddp: shard the data without padding (each word once per epoch), so ranks may get different "
             "numbers of batches; the training loop runs inside DistributedDataParallel::join")
      ->disable_flag_override();
  a.add_option("--workers", o.workers, "forked DataLoader workers (0 loads in the main process)")
      ->check(at_least(0))
      ->type_name("N");
  a.add_option("--batch-size", o.batch_size, "training batch")->check(at_least(1))->type_name("N");
  a.add_option("--eval-batch-size", o.eval_batch_size, "evaluation batch")->check(at_least(1))->type_name("N");
  a.add_option("--lr", o.lr, "Adam learning rate")->check(ember::cli::positive())->type_name("X");
  a.add_option_function<int64_t>(
       "--limit", [&o](const int64_t& n) { o.limit = static_cast<size_t>(n); },
       "N train and N test words per language, spread evenly over each split")
      ->check(at_least(1))
      ->type_name("N");
  a.add_option_function<std::string>(
       "--batch-first", [&o](const std::string& v) { o.batch_first = v == "true" || v == "1"; },
       "true: input [B x T]; false: [T x B], scattered on dim 1")
      ->check(one_of({"true", "1", "false", "0"}))
      ->default_str("true")
      ->type_name("B");
  a.add_flag_callback(
       "--no-total-length", [&o] { o.total_length = false; },
       "unpack without total_length: DataParallel then fails, as in the FAQ")
      ->disable_flag_override();
  a.add_option("--augment", o.augment_p, "drop one random byte of a training word with probability P")
      ->check(number_in(0, 1, false, "a probability"))
      ->type_name("P");
  a.add_option("--dropout", o.dropout,
               "dropout on the pooled LSTM features; each sample's mask comes from the seed and its global "
               "position, not from the rank")
      ->check(number_in(0, 1, true, "a probability"))
      ->type_name("P");
  a.add_flag("--deterministic", o.deterministic,
             "world-size-invariant training: each global batch is --shards shards, each its own "
             "forward/backward, gradients summed exactly; the same bits at any number of ranks, devices, threads "
             "and workers (docs/DETERMINISM.md)")
      ->disable_flag_override();
  a.add_option("--shards", o.shards, "--deterministic: virtual shards per global batch")
      ->check(at_least(1))
      ->type_name("N");
  ember_examples::add_ft_flags(a, {o.ft, o.trace_steps, o.ft_fault});
  a.add_option("--amp", o.amp,
               "mixed precision: autocast on the training device; fp16 adds a dynamic loss scale (GradScaler), "
               "whose skipped steps every --ddp rank shares")
      ->check(one_of({"bf16", "fp16"}))
      ->type_name("DTYPE");
  a.get_option("--resume")
      ->description("continue from the last checkpoint in --checkpoint-dir, on any number of ranks (or none): "
                    "the same global sample order goes on");
  a.add_option("--checkpoint-every", o.checkpoint_every,
               "also write the last checkpoint every N training steps (mid-epoch)")
      ->check(at_least(1))
      ->default_str("")
      ->type_name("N");
  a.add_option("--max-steps", o.max_steps, "stop after N training steps in all, writing a checkpoint there")
      ->check(at_least(1))
      ->default_str("")
      ->type_name("N");
  a.add_option("--checkpoint-dir", o.checkpoint_dir, "one checkpoint per epoch")->type_name("DIR");
  a.add_option("--dict-dir", o.dict_dir, "where the word lists are")->type_name("DIR");
  ember_examples::add_output_flags(a, {o.metrics_path, o.progress, o.observe});
  return app;
}

}  // namespace

std::string usage() { return ember_examples::usage_of<Options>(command_line); }

Options parse_options(int argc, const char* const* argv) {
  Options o = ember_examples::parse_command_line<Options>(command_line, argc, argv);
  if (o.help) return o;
  ember_examples::check_ft_flags({o.ft, o.trace_steps, o.ft_fault}, o.ddp, o.backend, o.resume);
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
  if (o.ft) {
    EMBER_CHECK_T(ValueError, !o.zero && !o.uneven && o.amp.empty() && o.augment_p == 0 && !o.resume,
                  "--ft: --zero, --uneven, --amp, --augment and --resume are not supported with it (a replacement "
                  "takes its state from a live rank)");
    EMBER_CHECK_T(ValueError, o.batch_size % o.shards == 0, "--ft: --batch-size ", o.batch_size,
                  " must be a multiple of --shards ", o.shards, " (the ranks of each quorum share the shards)");
  }
  if (o.deterministic) {
    EMBER_CHECK_T(ValueError, o.batch_size % o.shards == 0, "--deterministic: --batch-size ", o.batch_size,
                  " must be a multiple of --shards ", o.shards, " (every shard holds the same number of samples)");
    EMBER_CHECK_T(ValueError, !o.uneven,
                  "--deterministic: --uneven (per-rank batches, not shards of a global batch) is not supported with it");
  }
  return o;
}

}  // namespace rnn_dp
