// Checkpoints: a module's state_dict and (optionally) an optimizer's state in ONE safetensors
// file, readable by Python's safetensors. Tensors: "model.<state_dict key>" and
// "optim.<group>.<param index>.<state key>"; __metadata__ holds the format tag, the optimizer
// type, each group's hyper-parameters ("optim.<group>.options", JSON) and parameter indices
// ("optim.<group>.params"), the CPU default generator's state ("rng.cpu", hex) and user entries
// ("extra.<key>"). A save/load round trip is bit-exact, so training resumes exactly. Writes are
// atomic (see save_safetensors). Not synchronized with concurrent training on the same objects.
#pragma once
#include <map>
#include <string>

#include "nn/module.h"
#include "nn/optim/optimizer.h"

namespace ember::nn {

struct LoadCheckpointOptions {
  bool strict = true;              // Module::load_state_dict's strict
  bool restore_rng_state = false;  // also restore the CPU default generator saved in the file
};

/// Writes module (and optimizer, when non-null) state and `extra` string metadata to `path`.
/// Throws ValueError for an extra key or value that is not UTF-8, ember::Error on I/O failure.
void save_checkpoint(const std::string& path, const Module& module, const optim::Optimizer* optimizer = nullptr,
                     const std::map<std::string, std::string>& extra = {});

/// Loads what save_checkpoint wrote into existing objects of the same structure. `extra`, when
/// given, receives the user metadata. Throws ValueError when the file is not an ember
/// checkpoint, lacks optimizer state that was asked for, holds another optimizer type, or does
/// not match the module (missing/unexpected/mismatched keys, as load_state_dict reports) or the
/// optimizer's groups; the optimizer is checked before anything is modified.
void load_checkpoint(const std::string& path, Module& module, optim::Optimizer* optimizer = nullptr,
                     std::map<std::string, std::string>* extra = nullptr, const LoadCheckpointOptions& options = {});

}  // namespace ember::nn
