#include "examples/word_lm/options.h"

#include "core/error.h"
#include "examples/common/cli.h"

namespace word_lm {

using ember::ValueError;
using ember_examples::parse_double;
using ember_examples::parse_int;

std::string usage() {
  return R"(usage: word_lm [options]
Trains PyTorch's word_language_model (Embedding -> Dropout -> 2-layer LSTM with dropout ->
Dropout -> Linear decoder) on the King James Bible (Debian's bible-kjv-text), with truncated
backpropagation through time: the hidden state is carried from chunk to chunk but detached, so
each backward stops at the chunk's start (the PyTorch FAQ's repackage_hidden). SGD with gradient
clipping; the learning rate is divided by 4 after an epoch whose validation loss did not
improve. Prints validation and test perplexity per epoch.

  --data PATH            bible-kjv data file (default /usr/lib/bible.data)
  --vocab-size N         vocabulary: <unk>, <eos> and the N-2 most frequent training words (default 10000)
  --train-tokens N       use only the first N training tokens and N/10 validation and test tokens
  --emsize N             embedding size (default 200)
  --nhid N               LSTM hidden size (default 200)
  --nlayers N            LSTM layers (default 2)
  --dropout P            dropout on the embedding, between LSTM layers and before the decoder (default 0.2)
  --tied                 the decoder's weight is the embedding's (needs --nhid = --emsize)
  --lr X                 initial SGD learning rate (default 20)
  --clip X               clip_grad_norm_ bound (default 0.25)
  --epochs N             epochs (default 6)
  --batch-size N         training streams, over all ranks (default 20)
  --eval-batch-size N    validation/test streams, over all ranks (default 10)
  --bptt N               chunk length of truncated backpropagation (default 35)
  --seed N               seed of initialization and dropout (default 1111)
  --threads N            intra-op threads (default: available cores / local ranks)
  --ddp                  DistributedDataParallel, one rank per process: run under `ember-run
                         --nproc-per-node N`, `mpirun -np N` or torchrun; each rank takes
                         batch/N of the streams; rank 0 prints and checkpoints
  --backend NAME         --ddp: tcp | mpi | nccl (default: mpi under mpirun, else tcp)
  --timeout S            --ddp: seconds any collective may take (default 300)
  --resume               continue from the last checkpoint in --checkpoint-dir
  --deterministic        world-size-invariant training: the streams are --shards shards, each its
                         own forward/backward, gradients summed exactly; the same bits at any
                         number of ranks and threads, and across a resume (docs/DETERMINISM.md)
  --shards N             --deterministic: shards per step, dividing --batch-size (default 4)
  --max-steps N          --deterministic: stop after N training chunks in all, with a checkpoint
                         that --resume continues from mid-epoch
  --checkpoint-dir DIR   last.safetensors, best.safetensors and one per epoch (default runs/word_lm/checkpoints)
  --metrics PATH         JSON lines, one per epoch, appended (default runs/word_lm/metrics.jsonl)
  --progress MODE        auto | tty | lines | none (default auto)
  --help                 this text
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
    auto positive = [&](double x) {
      EMBER_CHECK_T(ValueError, x > 0, arg, ": expected a positive number, got ", x);
      return x;
    };

    if (arg == "--help" || arg == "-h") {
      no_value();
      o.help = true;
    } else if (arg == "--data") {
      o.data = take();
    } else if (arg == "--vocab-size") {
      o.vocab_size = parse_int(arg, take(), 2);
    } else if (arg == "--train-tokens") {
      o.train_tokens = parse_int(arg, take(), 1);
    } else if (arg == "--emsize") {
      o.emsize = parse_int(arg, take(), 1);
    } else if (arg == "--nhid") {
      o.nhid = parse_int(arg, take(), 1);
    } else if (arg == "--nlayers") {
      o.nlayers = parse_int(arg, take(), 1);
    } else if (arg == "--dropout") {
      o.dropout = parse_double(arg, take());
      EMBER_CHECK_T(ValueError, o.dropout >= 0 && o.dropout < 1, arg, ": expected a probability in [0, 1), got ",
                    o.dropout);
    } else if (arg == "--tied") {
      no_value();
      o.tied = true;
    } else if (arg == "--lr") {
      o.lr = positive(parse_double(arg, take()));
    } else if (arg == "--clip") {
      o.clip = positive(parse_double(arg, take()));
    } else if (arg == "--epochs") {
      o.epochs = static_cast<int>(parse_int(arg, take(), 1));
    } else if (arg == "--batch-size") {
      o.batch_size = parse_int(arg, take(), 1);
    } else if (arg == "--eval-batch-size") {
      o.eval_batch_size = parse_int(arg, take(), 1);
    } else if (arg == "--bptt") {
      o.bptt = parse_int(arg, take(), 1);
    } else if (arg == "--deterministic") {
      no_value();
      o.deterministic = true;
    } else if (arg == "--shards") {
      o.shards = parse_int(arg, take(), 1);
    } else if (arg == "--max-steps") {
      o.max_steps = parse_int(arg, take(), 1);
    } else if (arg == "--checkpoint-dir") {
      o.checkpoint_dir = take();
    } else if (arg == "--metrics") {
      o.metrics_path = take();
    } else if (arg == "--progress") {
      o.progress = ember_examples::progress_mode_from_string(take());
    } else {
      EMBER_THROW(ValueError, "unknown option '", args.raw(), "' (see --help)");
    }
  }
  EMBER_CHECK_T(ValueError, !o.tied || o.nhid == o.emsize,
                "--tied: the decoder's weight is the embedding's, so --nhid must equal --emsize (got ", o.nhid, " and ",
                o.emsize, ")");
  EMBER_CHECK_T(ValueError, o.ddp || o.backend.empty(), "--backend applies only with --ddp");
  EMBER_CHECK_T(ValueError, !o.deterministic || o.batch_size % o.shards == 0, "--deterministic: --batch-size ",
                o.batch_size, " must be a multiple of --shards ", o.shards, " (every shard holds the same streams)");
  EMBER_CHECK_T(ValueError, o.deterministic || o.max_steps == 0,
                "--max-steps applies only with --deterministic (its mid-epoch checkpoint holds every shard's state)");
  return o;
}

}  // namespace word_lm
