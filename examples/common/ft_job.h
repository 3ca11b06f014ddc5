// What the examples' fault-tolerant loops share (rnn_dp --ft and word_lm --ft under
// `ember-run --ft`, parallel/ft/manager.h): the manager's options with the state a replacement
// receives (model, optimizer state, the default CPU generator, and the example's own text
// entries), --ft-fault's injected failures, and --trace-steps' line. Used from the training
// loop's thread.
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "nn/module.h"
#include "nn/optim/optimizer.h"
#include "parallel/ft/manager.h"

namespace ember_examples {

/// --ft-fault SLOT:INCARNATION:STEP:POINT:SIGNAL[,...]: that incarnation of that rank slot raises
/// SIGNAL (KILL or STOP; SLEEP<ms> sleeps instead, a straggler) on itself at STEP (* for any),
/// at POINT (forward, backward, commit or loaded: the loop names where it calls at()). It prints
/// "ft-fault: ..." with the wall-clock time in ms first.
class FtFaults {
 public:
  /// Throws ValueError naming the malformed item.
  FtFaults(const std::string& spec, int slot, int64_t incarnation, std::FILE* out);
  void at(const std::string& point, int64_t step) const;

 private:
  struct Fault {
    int slot = -1;
    int64_t incarnation = 0;
    int64_t step = 0;  // -1: any
    std::string point;
    int signo = 0;         // 0: sleep
    int64_t sleep_ms = 0;
  };
  std::vector<Fault> faults_;
  int slot_;
  int64_t incarnation_;
  std::FILE* out_;
};

/// A rank's start under --ft: checks that it runs under `ember-run --ft` (ValueError naming the
/// launcher when not), sets the intra-op threads (`threads`, or the cores this process may use
/// shared by the node's ranks) and, with `deterministic`, the deterministic algorithms.
void prepare_ft_rank(int threads, bool deterministic);

/// The example's own part of the state a replacement receives (sampler position, learning rate,
/// ...): written into the state dict's metadata, and read back after the rest is loaded.
struct FtExtraState {
  std::function<void(ember::parallel::ft::StateDict&)> save;
  std::function<void(const ember::parallel::ft::StateDict&)> load;
};

/// ft::options_from_environment() (throws ValueError when not under `ember-run --ft`) with
/// state_dict / load_state_dict over `model` ("model.<name>"), `optimizer` ("optim.<index>.<name>")
/// and the default CPU generator, and the manager's log lines on `out`. `model` and `optimizer`
/// must outlive the manager.
ember::parallel::ft::ManagerOptions ft_manager_options(ember::nn::Module& model, ember::optim::Optimizer& optimizer,
                                                       std::FILE* out, FtExtraState extra = {});

/// FNV-1a over every parameter's bytes, in name order, as 16 hex digits (--trace-steps).
std::string parameter_hash(const ember::nn::Module& m);
/// Wall-clock milliseconds since the epoch (--trace-steps, --ft-fault: comparable across ranks).
double wall_ms();

/// --trace-steps under --ft, after each committed step: "step-trace step=S slot=R ranks=W
/// hash=H t_ms=T ft_ms=F" (the tests read it: tests/examples/rnn_dp_ft_test.cpp).
void print_ft_step_trace(std::FILE* out, int64_t step, const ember::parallel::ft::Manager& manager,
                         const ember::nn::Module& model, double protocol_ms);

}  // namespace ember_examples
