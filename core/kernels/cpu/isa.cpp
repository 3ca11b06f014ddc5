#include "core/kernels/cpu/isa.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/env.h"

namespace ember::kernels::cpu {
namespace {

CpuIsa detect() {
#if EMBER_HAVE_X86_VARIANTS
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma")) {
    return CpuIsa::kAvx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2")) {
    return CpuIsa::kAvx2;
  }
#endif
  return CpuIsa::kBaseline;
}

// Indexed by CpuIsa: the names isa_name() gives and EMBER_CPU_ISA takes.
constexpr std::array<const char*, 3> kIsaNames = {"baseline", "avx2", "avx512"};

CpuIsa env_cap() {
  const std::string e = env::choice("EMBER_CPU_ISA", {kIsaNames[0], kIsaNames[1], kIsaNames[2]}, kIsaNames[2]);
  return static_cast<CpuIsa>(std::find(kIsaNames.begin(), kIsaNames.end(), e) - kIsaNames.begin());
}

std::atomic<int8_t>& cap() {
  static std::atomic<int8_t> c{static_cast<int8_t>(env_cap())};
  return c;
}

}  // namespace

CpuIsa hardware_isa() {
  static const CpuIsa isa = detect();
  return isa;
}

CpuIsa cpu_isa() {
  const int8_t hw = static_cast<int8_t>(hardware_isa());
  const int8_t c = cap().load(std::memory_order_relaxed);
  return static_cast<CpuIsa>(hw < c ? hw : c);
}

const char* isa_name(CpuIsa isa) {
  const auto i = static_cast<size_t>(isa);
  return i < kIsaNames.size() ? kIsaNames[i] : "?";
}

ScopedCpuIsa::ScopedCpuIsa(CpuIsa isa) : previous_(static_cast<CpuIsa>(cap().load())) {
  cap().store(static_cast<int8_t>(isa));
}
ScopedCpuIsa::~ScopedCpuIsa() { cap().store(static_cast<int8_t>(previous_)); }

}  // namespace ember::kernels::cpu
