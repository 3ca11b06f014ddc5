// The CPU-feature dispatch of ember's hand-vectorized CPU kernels, in one place. A kernel that
// has ISA variants compiles its body (an always-inline template) three times through the
// function attributes below -- baseline x86-64 (SSE2), AVX2+FMA, AVX-512 -- and picks one per
// call with cpu_isa(). Machines differ (some have AVX-512, some only AVX2), so a test must be
// able to run every variant the CPU can (ScopedCpuIsa caps the choice). Explicit dispatch, not
// GCC's target_clones: ifunc resolvers run before the sanitizer runtimes and cannot be steered
// by a test. Thread-safe.
#pragma once
#include <cstdint>

namespace ember::kernels::cpu {

enum class CpuIsa : int8_t { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };

/// The widest ISA this CPU supports (AVX-512 means F, DQ, BW, VL), capped by the environment
/// variable EMBER_CPU_ISA=baseline|avx2|avx512 (read once) and by ScopedCpuIsa.
CpuIsa cpu_isa();
/// What the hardware supports, ignoring the caps.
CpuIsa hardware_isa();
const char* isa_name(CpuIsa isa);

/// Caps cpu_isa() for the whole process while alive (tests and benchmarks); not re-entrant
/// across threads that dispatch concurrently with its construction or destruction.
class ScopedCpuIsa {
 public:
  explicit ScopedCpuIsa(CpuIsa isa);
  ~ScopedCpuIsa();
  ScopedCpuIsa(const ScopedCpuIsa&) = delete;
  ScopedCpuIsa& operator=(const ScopedCpuIsa&) = delete;

 private:
  CpuIsa previous_;
};

}  // namespace ember::kernels::cpu

#if defined(__GNUC__) && defined(__x86_64__)
#define EMBER_TARGET_AVX2 __attribute__((target("avx2,fma,bmi2")))
#define EMBER_TARGET_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,bmi2")))
#define EMBER_HAVE_X86_VARIANTS 1
#else
#define EMBER_TARGET_AVX2
#define EMBER_TARGET_AVX512
#define EMBER_HAVE_X86_VARIANTS 0
#endif

/// Defines `ret name params` calling `ret name##_<isa> params`, three copies of `body` (a
/// statement using the parameters, usually a call of an always-inline template with the
/// vector width kW: 4, 8 or 16 floats) compiled for baseline, AVX2 and AVX-512.
#define EMBER_CPU_ISA_VARIANTS(ret, name, params, args, body)                                  \
  namespace {                                                                                  \
  ret name##_baseline params {                                                                 \
    [[maybe_unused]] constexpr int kW = 4;                                                     \
    body;                                                                                      \
  }                                                                                            \
  EMBER_TARGET_AVX2 ret name##_avx2 params {                                                   \
    [[maybe_unused]] constexpr int kW = 8;                                                     \
    body;                                                                                      \
  }                                                                                            \
  EMBER_TARGET_AVX512 ret name##_avx512 params {                                               \
    [[maybe_unused]] constexpr int kW = 16;                                                    \
    body;                                                                                      \
  }                                                                                            \
  }                                                                                            \
  ret name params {                                                                            \
    switch (::ember::kernels::cpu::cpu_isa()) {                                                \
      case ::ember::kernels::cpu::CpuIsa::kAvx512: return name##_avx512 args;                  \
      case ::ember::kernels::cpu::CpuIsa::kAvx2: return name##_avx2 args;                      \
      default: return name##_baseline args;                                                    \
    }                                                                                          \
  }
