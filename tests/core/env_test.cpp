// core/env.h: every environment variable ember reads is parsed one way, and a value outside
// what a variable accepts is a ValueError naming the variable, the accepted values and the value.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/env.h"
#include "core/error.h"
#include "core/kernels/cpu/isa.h"
#include "tests/support/error_text.h"

namespace ember {
namespace {

using support::error_of;

constexpr const char* kVar = "EMBER_ENV_TEST_VARIABLE";

class Env : public ::testing::Test {
 protected:
  void TearDown() override { ::unsetenv(kVar); }
  static void set(const char* value) { ::setenv(kVar, value, 1); }
};

TEST_F(Env, UnsetAndEmptyAreTheDefault) {
  ::unsetenv(kVar);
  EXPECT_FALSE(env::get(kVar).has_value());
  EXPECT_TRUE(env::flag(kVar, true));
  EXPECT_FALSE(env::flag(kVar, false));
  EXPECT_EQ(env::choice(kVar, {"a", "b"}, "b"), "b");
  EXPECT_FALSE(env::integer(kVar, 1, 9).has_value());
  set("");
  EXPECT_FALSE(env::get(kVar).has_value());
  EXPECT_TRUE(env::flag(kVar, true));
  EXPECT_EQ(env::choice(kVar, {"a", "b"}, "a"), "a");
}

TEST_F(Env, SwitchesAcceptOneSpellingFamily) {
  for (const char* on : {"1", "true", "ON", "Yes"}) {
    set(on);
    EXPECT_TRUE(env::flag(kVar, false)) << on;
  }
  for (const char* off : {"0", "false", "Off", "NO"}) {
    set(off);
    EXPECT_FALSE(env::flag(kVar, true)) << off;
  }
  set("2");
  EXPECT_EQ(error_of<ValueError>([] { env::flag(kVar, true); }),
            std::string(kVar) + ": expected 1 or 0 (true/false, on/off, yes/no), got '2'");
}

TEST_F(Env, ChoicesAndIntegersNameWhatTheyAccept) {
  set("avx2x");
  EXPECT_EQ(error_of<ValueError>([] { env::choice(kVar, {"baseline", "avx2", "avx512"}, "avx512"); }),
            std::string(kVar) + ": expected baseline, avx2 or avx512, got 'avx2x'");
  set("avx2");
  EXPECT_EQ(env::choice(kVar, {"baseline", "avx2", "avx512"}, "avx512"), "avx2");
  set("12");
  EXPECT_EQ(env::integer(kVar, 1, 16), 12);
  for (const char* bad : {"17", "0", "12x", "x"}) {
    set(bad);
    EXPECT_EQ(error_of<ValueError>([] { env::integer(kVar, 1, 16); }),
              std::string(kVar) + ": expected an integer in [1, 16], got '" + bad + "'")
        << bad;
  }
}

// Regression: a misspelt EMBER_CPU_ISA meant avx512. In a fresh process (the ISA cap is read once).
[[noreturn]] void ask_isa_with(const char* value) {
  ::setenv("EMBER_CPU_ISA", value, 1);
  try {
    (void)kernels::cpu::cpu_isa();
  } catch (const ValueError& e) {
    std::fprintf(stderr, "error=[%s]\n", e.what());
    std::fflush(stderr);
    std::_Exit(3);
  }
  std::_Exit(0);
}

TEST(EnvCpuIsa, AMisspeltIsaIsAnError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(ask_isa_with("avx2x"), ::testing::ExitedWithCode(3),
              "error=\\[EMBER_CPU_ISA: expected baseline, avx2 or avx512, got 'avx2x'\\]");
  EXPECT_EXIT(ask_isa_with("baseline"), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace ember
