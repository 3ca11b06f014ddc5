// Fuzz target: the checkpoint loader (nn/checkpoint.cpp) into a small model and an Adam
// optimizer, built fresh for every input so inputs do not influence each other. The first
// byte picks LoadCheckpointOptions (strict, restore_rng_state); the rest is the file. A load
// that succeeds is followed by one training step, so state that loads but cannot be used is
// caught too. Anything but an ember::Error (a crash, a sanitizer report, another exception
// type) is a finding. Seeds: fuzz/corpus/checkpoint (fuzz/make_seeds.cpp).
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "autograd/ops.h"
#include "core/error.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/seed_model.h"
#include "nn/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static ember::fuzz::MemFile file;
  const std::string& path = file.set(data + 1, size - 1);
  ember::nn::LoadCheckpointOptions options;
  options.strict = (data[0] & 1) == 0;
  options.restore_rng_state = (data[0] & 2) != 0;
  ember::fuzz::SeedModel m;
  try {
    std::map<std::string, std::string> extra;
    ember::nn::load_checkpoint(path, *m.net, m.opt.get(), &extra, options);
    m.step();
  } catch (const ember::Error&) {
  }
  return 0;
}
