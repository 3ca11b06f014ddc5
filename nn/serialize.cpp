#include "nn/serialize.h"

namespace ember {

// An optimizer's file is a checkpoint of a module without tensors: the optimizer's part only.
void save(const optim::Optimizer& optimizer, const std::string& path) {
  const nn::Module none;
  nn::save_checkpoint(path, none, &optimizer);
}

void load(optim::Optimizer& optimizer, const std::string& path) {
  nn::Module none;
  // strict=false: a checkpoint that also holds a model's tensors loads its optimizer part.
  nn::load_checkpoint(path, none, &optimizer, nullptr, {.strict = false});
}

}  // namespace ember
