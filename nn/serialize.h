// torch::save / torch::load for modules and optimizers: save(model, path), load(model, path),
// save(optimizer, path), load(optimizer, path), with a module given as a shared_ptr, a module
// holder (EMBER_MODULE, nn::Linear) or a reference. The file is an ember checkpoint
// (nn/checkpoint.h: safetensors, readable by Python's safetensors), not a TorchScript archive:
// a module's file holds its state_dict, an optimizer's its state and hyper-parameters. load()
// fills an existing object of the same structure and checks everything before changing
// anything; errors are load_checkpoint's (ValueError naming what does not match).
#pragma once
#include <concepts>
#include <memory>
#include <string>

#include "nn/checkpoint.h"
#include "nn/module.h"
#include "nn/module_holder.h"
#include "nn/optim/optimizer.h"

namespace ember {

inline void save(const nn::Module& module, const std::string& path) { nn::save_checkpoint(path, module); }
template <std::derived_from<nn::Module> M>
void save(const std::shared_ptr<M>& module, const std::string& path) {
  EMBER_CHECK_T(ValueError, module != nullptr, "save: the module is null (path ", path, ")");
  nn::save_checkpoint(path, *module);
}
template <class Impl>
void save(const nn::ModuleHolder<Impl>& module, const std::string& path) {
  nn::save_checkpoint(path, *module);
}

inline void load(nn::Module& module, const std::string& path) { nn::load_checkpoint(path, module); }
template <std::derived_from<nn::Module> M>
void load(const std::shared_ptr<M>& module, const std::string& path) {
  EMBER_CHECK_T(ValueError, module != nullptr, "load: the module is null (path ", path, ")");
  nn::load_checkpoint(path, *module);
}
template <class Impl>
void load(const nn::ModuleHolder<Impl>& module, const std::string& path) {
  nn::load_checkpoint(path, *module);
}

/// The optimizer's state and each group's hyper-parameters (no module state).
void save(const optim::Optimizer& optimizer, const std::string& path);
/// Fills `optimizer`, which must have the saved one's type and group sizes.
void load(optim::Optimizer& optimizer, const std::string& path);

}  // namespace ember
