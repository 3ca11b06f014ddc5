// Fuzz target: the safetensors reader (core/serialization.cpp; Note [Safetensors validation] in
// core/detail/safetensors_header.cpp).
// Each input is a whole file. Loading must either return tensors that exactly cover the byte
// buffer or throw an ember::Error; any other exception, a crash or a sanitizer report is a
// finding. Seeds: fuzz/corpus/safetensors (fuzz/make_seeds.cpp).
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "core/error.h"
#include "core/serialization.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ember::fuzz::MemFile file;
  const std::string& path = file.set(data, size);
  try {
    std::map<std::string, std::string> metadata;
    auto tensors = ember::load_safetensors(path, &metadata);
    // Touch every byte of every tensor: an entry that claimed more than it owns shows up here.
    uint64_t sum = 0;
    for (const auto& [name, t] : tensors) {
      const auto* p = static_cast<const uint8_t*>(t.raw_data());
      for (size_t i = 0; i < t.nbytes(); ++i) sum += p[i];
    }
    volatile uint64_t sink = sum;
    (void)sink;
  } catch (const ember::Error&) {
  }
  return 0;
}
