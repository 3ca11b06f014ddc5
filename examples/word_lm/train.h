// The training run of examples/word_lm: corpus, vocabulary, RNNModel, truncated BPTT with SGD,
// clip_grad_norm_ and learning-rate annealing, validation and test perplexity per epoch, one
// result line per epoch on `out`, metrics appended as JSON lines, checkpoints and bit-exact
// --resume, and --ddp (Note [word_lm under DDP] in train.cpp). One run per process at a time (it
// sets the process-wide thread count and seeds ember's default generators).
#pragma once
#include <cstdio>
#include <functional>
#include <memory>
#include <tuple>
#include <vector>

#include "examples/word_lm/model.h"
#include "examples/word_lm/options.h"
#include "nn/optim/optimizer.h"

namespace word_lm {

struct EpochResult {
  int epoch = 0;
  double lr = 0.0;          // the learning rate this epoch trained with
  double train_loss = 0.0;  // mean over the epoch's chunks of the chunk's mean token loss
  double val_loss = 0.0, test_loss = 0.0;  // mean token losses (perplexity = exp(loss))
  double epoch_s = 0.0;     // wall time of the training pass
  double tokens_per_s = 0.0;
};

/// Trains as `options` say and returns the epochs this process ran. Throws ember::Error (a
/// missing corpus, a bad option combination, a checkpoint of another run under --resume, ...).
std::vector<EpochResult> train(const Options& options, std::FILE* out = stdout);

/// How the training loop adds up its loss. kItem is the PyTorch FAQ's advice
/// (`total_loss += loss.item()`): a number, so each chunk's graph is freed after its backward.
/// kKeepHistory is the FAQ's bug (`total_loss += loss`): a tensor sum whose history holds every
/// chunk's graph, and with it the activations it saved, alive until the epoch ends.
enum class LossTally { kItem, kKeepHistory };

/// One epoch's truncated backpropagation through time over source [T, B]: chunk i takes rows
/// [i * bptt, i * bptt + len) as input and the rows one further as targets (len = bptt, shorter
/// at the end), starts from the previous chunk's final state detached (repackage_hidden), and
/// runs zero_grad, forward, cross_entropy, backward, clip_grad_norm_, step. Not thread-safe.
class TruncatedBptt {
 public:
  using Forward = std::function<std::tuple<ember::Tensor, RNNModel::State>(const ember::Tensor&,
                                                                            const RNNModel::State&)>;
  TruncatedBptt(Forward forward, std::vector<ember::Tensor> parameters, ember::optim::Optimizer& optimizer,
                double clip, int64_t bptt, LossTally tally = LossTally::kItem);
  /// Chunks in `source` (rows - 1 targets, bptt per chunk).
  int64_t num_chunks(const ember::Tensor& source) const;
  /// Trains on chunk `chunk` of `source`; returns its mean token loss.
  double step(const ember::Tensor& source, int64_t chunk);
  /// The sum of the chunk losses since construction or reset(hidden).
  double total_loss() const;
  /// The gradients' total norm before clipping, at the last step.
  double last_grad_norm() const { return grad_norm_; }
  /// A new epoch: the state to start from, and the loss sum back to zero.
  void reset(RNNModel::State hidden);

 private:
  Forward forward_;
  std::vector<ember::Tensor> parameters_;
  ember::optim::Optimizer& optimizer_;
  double clip_;
  int64_t bptt_;
  LossTally tally_;
  RNNModel::State hidden_;
  double total_ = 0.0;
  double grad_norm_ = 0.0;
  ember::Tensor history_total_;  // kKeepHistory only
};

/// Memory in use after a chunk: the CPU caching allocator's allocated bytes (tensor storage)
/// and the C heap's bytes in use (mallinfo2: autograd nodes and other host objects live there).
struct ChunkMemory {
  int64_t allocated_bytes = 0;
  int64_t heap_bytes = 0;
};

/// Trains a fresh model of `config` on random tokens ([chunks * bptt + 1, batch], fixed seed)
/// for `chunks` chunks with `tally` and returns the memory in use after each chunk. See Note
/// [Memory per chunk] in train.cpp for what each tally keeps alive.
std::vector<ChunkMemory> memory_per_chunk(const ModelConfig& config, int64_t batch, int64_t bptt, int64_t chunks,
                                          LossTally tally);

}  // namespace word_lm
