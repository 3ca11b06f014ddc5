#include "examples/word_lm/options.h"

#include "core/error.h"
#include "examples/common/cli.h"

namespace word_lm {

using ember::ValueError;
using ember::cli::at_least;
using ember::cli::positive;

namespace {

// The command line: every flag, its value's check and its help line. Writes into `o`.
std::unique_ptr<CLI::App> command_line(Options& o) {
  auto app = ember::cli::make_app(
      "word_lm",
      "Trains PyTorch's word_language_model (Embedding -> Dropout -> 2-layer LSTM with dropout -> Dropout -> "
      "Linear decoder) on the King James Bible (Debian's bible-kjv-text), with truncated backpropagation through "
      "time: the hidden state is carried from chunk to chunk but detached, so each backward stops at the chunk's "
      "start (the PyTorch FAQ's repackage_hidden). SGD with gradient clipping; the learning rate is divided by 4 "
      "after an epoch whose validation loss did not improve. Prints validation and test perplexity per epoch.");
  auto& a = *app;
  a.add_option("--data", o.data, "bible-kjv data file")->type_name("PATH");
  a.add_option("--vocab-size", o.vocab_size, "vocabulary: <unk>, <eos> and the N-2 most frequent training words")
      ->check(at_least(2))
      ->type_name("N");
  a.add_option_function<int64_t>(
       "--train-tokens", [&o](const int64_t& n) { o.train_tokens = n; },
       "use only the first N training tokens and N/10 validation and test tokens")
      ->check(at_least(1))
      ->type_name("N");
  a.add_option("--emsize", o.emsize, "embedding size")->check(at_least(1))->type_name("N");
  a.add_option("--nhid", o.nhid, "LSTM hidden size")->check(at_least(1))->type_name("N");
  a.add_option("--nlayers", o.nlayers, "LSTM layers")->check(at_least(1))->type_name("N");
  a.add_option("--dropout", o.dropout, "dropout on the embedding, between LSTM layers and before the decoder")
      ->check(ember::cli::number_in(0, 1, true, "a probability"))
      ->type_name("P");
  a.add_flag("--tied", o.tied, "the decoder's weight is the embedding's (needs --nhid = --emsize)")
      ->disable_flag_override();
  a.add_option("--lr", o.lr, "initial SGD learning rate")->check(positive())->type_name("X");
  a.add_option("--clip", o.clip, "clip_grad_norm_ bound")->check(positive())->type_name("X");
  a.add_option("--epochs", o.epochs, "epochs")->check(at_least(1))->type_name("N");
  a.add_option("--batch-size", o.batch_size, "training streams, over all ranks")->check(at_least(1))->type_name("N");
  a.add_option("--eval-batch-size", o.eval_batch_size, "validation/test streams, over all ranks")
      ->check(at_least(1))
      ->type_name("N");
  a.add_option("--bptt", o.bptt, "chunk length of truncated backpropagation")->check(at_least(1))->type_name("N");
  ember_examples::add_job_flags(a, {o.ddp, o.backend, o.timeout_s, o.seed, o.threads, o.resume},
                                "mpi under mpirun, else tcp");
  a.get_option("--seed")->description("seed of initialization and dropout");
  a.get_option("--threads")->description("intra-op threads (default: available cores / local ranks)")->default_str("");
  a.add_flag("--deterministic", o.deterministic,
             "world-size-invariant training: the streams are --shards shards, each its own forward/backward, "
             "gradients summed exactly; the same bits at any number of ranks and threads, and across a resume "
             "(docs/DETERMINISM.md)")
      ->disable_flag_override();
  a.add_option("--shards", o.shards, "--deterministic, --ft: shards per step, dividing --batch-size")
      ->check(at_least(1))
      ->type_name("N");
  a.add_option("--max-steps", o.max_steps,
               "--deterministic: stop after N training chunks in all, with a checkpoint that --resume continues "
               "from mid-epoch")
      ->check(at_least(1))
      ->default_str("")
      ->type_name("N");
  ember_examples::add_ft_flags(a, {o.ft, o.trace_steps, o.ft_fault});
  a.add_option("--checkpoint-dir", o.checkpoint_dir, "last.safetensors, best.safetensors and one per epoch")
      ->type_name("DIR");
  ember_examples::add_output_flags(a, {o.metrics_path, o.progress, o.observe});
  return app;
}

}  // namespace

std::string usage() { return ember_examples::usage_of<Options>(command_line); }

Options parse_options(int argc, const char* const* argv) {
  Options o = ember_examples::parse_command_line<Options>(command_line, argc, argv);
  if (o.help) return o;
  EMBER_CHECK_T(ValueError, !o.tied || o.nhid == o.emsize,
                "--tied: the decoder's weight is the embedding's, so --nhid must equal --emsize (got ", o.nhid, " and ",
                o.emsize, ")");
  EMBER_CHECK_T(ValueError, o.ddp || o.backend.empty(), "--backend applies only with --ddp");
  EMBER_CHECK_T(ValueError, !o.deterministic || o.batch_size % o.shards == 0, "--deterministic: --batch-size ",
                o.batch_size, " must be a multiple of --shards ", o.shards, " (every shard holds the same streams)");
  EMBER_CHECK_T(ValueError, o.deterministic || o.ft || o.max_steps == 0,
                "--max-steps applies only with --deterministic (its mid-epoch checkpoint holds every shard's state) "
                "or --ft");
  ember_examples::check_ft_flags({o.ft, o.trace_steps, o.ft_fault}, o.ddp, o.backend, o.resume);
  EMBER_CHECK_T(ValueError, !o.ft || o.batch_size % o.shards == 0, "--ft: --batch-size ", o.batch_size,
                " must be a multiple of --shards ", o.shards, " (the ranks of each quorum share the shards)");
  return o;
}

}  // namespace word_lm
