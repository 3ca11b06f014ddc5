// Generator and Philox4x32-10: the published Random123 known-answer vectors, seeding, state
// round trips, the per-device defaults, and thread safety of reserve().
#include "core/generator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/kernels/philox.h"

namespace ember {
namespace {

using kernels::PhiloxBlock;

void expect_block(const PhiloxBlock& got, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  EXPECT_EQ(got.v[0], a) << std::hex << got.v[0];
  EXPECT_EQ(got.v[1], b) << std::hex << got.v[1];
  EXPECT_EQ(got.v[2], c) << std::hex << got.v[2];
  EXPECT_EQ(got.v[3], d) << std::hex << got.v[3];
}

// Random123 kat_vectors, philox4x32 with 10 rounds.
TEST(Philox, KnownAnswerZero) {
  expect_block(kernels::philox4x32_10(PhiloxBlock{{0, 0, 0, 0}}, 0, 0), 0x6627e8d5u, 0xe169c58du,
               0xbc57ac4cu, 0x9b00dbd8u);
}

TEST(Philox, KnownAnswerAllOnes) {
  expect_block(kernels::philox4x32_10(PhiloxBlock{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}},
                                      0xffffffffu, 0xffffffffu),
               0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu);
}

TEST(Philox, KnownAnswerPi) {
  expect_block(kernels::philox4x32_10(PhiloxBlock{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}},
                                      0xa4093822u, 0x299f31d0u),
               0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u);
}

TEST(Philox, BlockMapsSeedToKeyAndOffsetToCounter) {
  // seed = key (low word first); counter = offset + block (low word first, carrying upward).
  uint64_t seed = (uint64_t{0x299f31d0u} << 32) | 0xa4093822u;
  PhiloxBlock direct = kernels::philox4x32_10(PhiloxBlock{{5, 1, 0, 0}}, 0xa4093822u, 0x299f31d0u);
  PhiloxBlock viaBlock = kernels::philox_block(seed, (uint64_t{1} << 32) + 2, 3);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(direct.v[k], viaBlock.v[k]);
  PhiloxBlock carried = kernels::philox_block(0, ~uint64_t{0}, 1);  // counter 2^64
  PhiloxBlock expect = kernels::philox4x32_10(PhiloxBlock{{0, 0, 1, 0}}, 0, 0);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(carried.v[k], expect.v[k]);
}

TEST(Philox, UniformConversionsStayInUnitInterval) {
  EXPECT_EQ(kernels::uint32_to_unit_float(0), 0.0f);
  EXPECT_LT(kernels::uint32_to_unit_float(0xffffffffu), 1.0f);
  EXPECT_EQ(kernels::uint32_to_unit_float(0xffffffffu), 1.0f - 1.0f / 16777216.0f);
  EXPECT_EQ(kernels::uint64_to_unit_double(0), 0.0);
  EXPECT_LT(kernels::uint64_to_unit_double(~uint64_t{0}), 1.0);
  EXPECT_LT(kernels::uint32_to_unit_float_bits(0xffffffffu, 8), 1.0f);
  EXPECT_EQ(kernels::uint32_to_unit_float_bits(0x80000000u, 8), 0.5f);
  float z0, z1;
  kernels::box_muller(0.0f, 0.25f, &z0, &z1);  // u1 = 0 -> log(1) = 0: finite
  EXPECT_EQ(z0, 0.0f);
  EXPECT_EQ(z1, 0.0f);
  double d0, d1;
  kernels::box_muller(1.0 - 1.0 / 9007199254740992.0, 0.0, &d0, &d1);
  EXPECT_TRUE(std::isfinite(d0));
  EXPECT_GT(d0, 8.0);  // the deep tail is reachable in double
}

TEST(Philox, MulhiMapsOntoRange) {
  EXPECT_EQ(kernels::mulhi_u64(0, 10), 0u);
  EXPECT_EQ(kernels::mulhi_u64(~uint64_t{0}, 10), 9u);
  EXPECT_EQ(kernels::mulhi_u64(uint64_t{1} << 63, 10), 5u);
}

TEST(Generator, ReserveReturnsCurrentAndAdvances) {
  Generator g(42);
  EXPECT_EQ(g.initial_seed(), 42u);
  PhiloxState a = g.reserve(10);
  PhiloxState b = g.reserve(3);
  PhiloxState c = g.reserve(0);
  EXPECT_EQ(a.seed, 42u);
  EXPECT_EQ(a.offset, 0u);
  EXPECT_EQ(b.offset, 10u);
  EXPECT_EQ(c.offset, 13u);
  g.manual_seed(7);
  EXPECT_EQ(g.initial_seed(), 7u);
  EXPECT_EQ(g.reserve(1).offset, 0u);  // manual_seed resets the offset
}

TEST(Generator, SameSeedSameStreamDifferentSeedsDiffer) {
  Generator a(123), b(123), c(124);
  std::vector<uint64_t> sa, sb, sc;
  for (int i = 0; i < 100; ++i) {
    sa.push_back(a.next_u64());
    sb.push_back(b.next_u64());
    sc.push_back(c.next_u64());
  }
  EXPECT_EQ(sa, sb);
  EXPECT_NE(sa, sc);
  EXPECT_EQ(std::set<uint64_t>(sa.begin(), sa.end()).size(), sa.size());  // no repeats
}

TEST(Generator, NextU64IsBlockAtOffset) {
  Generator g(99);
  g.reserve(5);
  uint64_t v = g.next_u64();
  EXPECT_EQ(v, kernels::philox_u64(kernels::philox_block(99, 5, 0), 0));
  EXPECT_EQ(g.reserve(0).offset, 6u);
}

TEST(Generator, StateRoundTripRestoresStream) {
  Generator g(555);
  g.next_u64();
  std::vector<uint8_t> state = g.get_state();
  ASSERT_EQ(state.size(), 16u);
  std::vector<uint64_t> first;
  for (int i = 0; i < 10; ++i) first.push_back(g.next_u64());
  g.set_state(state);
  std::vector<uint64_t> again;
  for (int i = 0; i < 10; ++i) again.push_back(g.next_u64());
  EXPECT_EQ(first, again);

  Generator other(1);
  other.set_state(state);  // a state moves between generators
  EXPECT_EQ(other.initial_seed(), 555u);
  EXPECT_EQ(other.next_u64(), first[0]);
}

TEST(Generator, SetStateRejectsWrongSizeAndKeepsState) {
  Generator g(8);
  g.reserve(4);
  EXPECT_THROW(g.set_state({}), ValueError);
  EXPECT_THROW(g.set_state(std::vector<uint8_t>(15)), ValueError);
  EXPECT_THROW(g.set_state(std::vector<uint8_t>(17)), ValueError);
  EXPECT_EQ(g.initial_seed(), 8u);
  EXPECT_EQ(g.reserve(0).offset, 4u);
}

TEST(Generator, SeedDrawsAFreshSeed) {
  Generator g(1);
  g.reserve(9);
  uint64_t s = g.seed();
  EXPECT_EQ(g.initial_seed(), s);
  EXPECT_EQ(g.reserve(0).offset, 0u);
  // Two draws colliding has probability 2^-64.
  EXPECT_NE(Generator().seed(), Generator().seed());
}

TEST(Generator, ConcurrentReserveHandsOutDisjointRanges) {
  Generator g(3);
  constexpr int kThreads = 4, kPerThread = 2000;
  std::vector<std::vector<uint64_t>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) got[t].push_back(g.reserve(2).offset);
    });
  for (auto& t : threads) t.join();
  std::set<uint64_t> all;
  for (auto& v : got) all.insert(v.begin(), v.end());
  EXPECT_EQ(all.size(), size_t{kThreads * kPerThread});
  EXPECT_EQ(g.reserve(0).offset, uint64_t{2 * kThreads * kPerThread});
}

TEST(DefaultGenerator, OnePerDeviceAndManualSeedSeedsAll) {
  Generator& cpu0 = default_generator();
  EXPECT_EQ(&cpu0, &default_generator(Device::cpu(0)));
  Generator& cpu1 = default_generator(Device::cpu(1));
  Generator& cuda0 = default_generator(Device::cuda(0));
  EXPECT_NE(&cpu0, &cpu1);
  EXPECT_NE(&cpu0, &cuda0);
  EXPECT_TRUE(cuda0.device() == Device::cuda(0));
  EXPECT_TRUE(cpu1.device() == Device::cpu(1));

  cpu0.reserve(17);
  manual_seed(2024);
  EXPECT_EQ(cpu0.initial_seed(), 2024u);
  EXPECT_EQ(cpu1.initial_seed(), 2024u);
  EXPECT_EQ(cuda0.initial_seed(), 2024u);
  EXPECT_EQ(cpu0.reserve(0).offset, 0u);
  // A default created after manual_seed starts from that seed too (torch.manual_seed semantics).
  EXPECT_EQ(default_generator(Device::cuda(3)).initial_seed(), 2024u);
  EXPECT_EQ(cpu0.next_u64(), cuda0.next_u64());  // same seed, same stream on every device
}

TEST(DefaultGenerator, ConcurrentFirstUseYieldsOneGenerator) {
  std::vector<Generator*> seen(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] { seen[t] = &default_generator(Device::cpu(7)); });
  for (auto& t : threads) t.join();
  for (auto* g : seen) EXPECT_EQ(g, seen[0]);
}

// A device index no per-device table has room for is a missing device: DeviceError, as
// everywhere (core/device.h's check_device_exists).
TEST(DefaultGenerator, RejectsBadDeviceIndex) {
  EXPECT_THROW(default_generator(Device(DeviceType::CPU, -1)), DeviceError);
  EXPECT_THROW(default_generator(Device(DeviceType::CUDA, kMaxDevicesPerType)), DeviceError);
}

}  // namespace
}  // namespace ember
