// The training run of examples/rnn_dp: data, model, DataParallel (or one device, or with --ddp
// one rank of a DistributedDataParallel job: see Note [DDP mode] in train.cpp), DataLoader
// with forked workers, Adam, a progress bar per epoch, one result line per epoch on `out`,
// metrics appended as JSON lines, a checkpoint per epoch and bit-exact --resume.
// See Note [Deterministic runs] in train.cpp. One run per process at a time (it sets the
// process-wide thread count and seeds ember's default generators).
#pragma once
#include <cstdio>
#include <vector>

#include "examples/rnn_dp/options.h"

namespace rnn_dp {

struct EpochResult {
  int epoch = 0;
  double loss = 0.0;      // mean training loss over the epoch's samples
  double test_acc = 0.0;
  double epoch_s = 0.0;   // wall time of the training pass (data loading included, test pass not)
  double samples_per_s = 0.0;
  double samples = 0.0;   // training samples all ranks visited in the epoch (DDP's padding included)
};

/// Trains as `options` say and returns the epochs run by this process. Throws ember::Error (a
/// missing word list, a bad device, DataParallel's error under --no-total-length, ...).
std::vector<EpochResult> train(const Options& options, std::FILE* out = stdout);

}  // namespace rnn_dp
