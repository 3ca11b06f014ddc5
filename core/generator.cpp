// Generator: (seed, offset) under a mutex; the numbers themselves come from core/kernels/philox.h.
#include "core/generator.h"

#include <array>
#include <atomic>
#include <random>

#include "core/error.h"
#include "core/kernels/philox.h"

namespace ember {

namespace {

constexpr size_t kStateBytes = 16;
constexpr int kNumDeviceSlots = 2 * kMaxDevicesPerType;  // see Device::flat_index()

void put_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// The default generators. Created on first use and never destroyed (kernels on other threads
// may still use them during static destruction).
struct DefaultGenerators {
  std::mutex mu;
  std::array<std::atomic<Generator*>, kNumDeviceSlots> slots{};  // written under mu
  uint64_t seed = kDefaultSeed;  // seed for defaults created from now on; guarded by mu
};

DefaultGenerators& defaults() {
  static DefaultGenerators* d = new DefaultGenerators();
  return *d;
}

}  // namespace

Generator::Generator(uint64_t seed, Device device) : seed_(seed), offset_(0), device_(device) {}

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(mu_);
  seed_ = seed;
  offset_ = 0;
  ++seed_epoch_;
}

uint64_t Generator::seed_epoch() const {
  std::lock_guard<std::mutex> lock(mu_);
  return seed_epoch_;
}

uint64_t Generator::initial_seed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return seed_;
}

uint64_t Generator::seed() {
  std::random_device rd;
  uint64_t s = (static_cast<uint64_t>(rd()) << 32) ^ static_cast<uint64_t>(rd());
  manual_seed(s);
  return s;
}

std::vector<uint8_t> Generator::get_state() const {
  std::vector<uint8_t> state(kStateBytes);
  std::lock_guard<std::mutex> lock(mu_);
  put_u64(state.data(), seed_);
  put_u64(state.data() + 8, offset_);
  return state;
}

void Generator::set_state(const std::vector<uint8_t>& state) {
  EMBER_CHECK_T(ValueError, state.size() == kStateBytes, "Generator.set_state: expected a state of ",
                kStateBytes, " bytes (seed and offset, as returned by get_state()), got ", state.size(),
                " bytes");
  uint64_t seed = get_u64(state.data());
  uint64_t offset = get_u64(state.data() + 8);
  std::lock_guard<std::mutex> lock(mu_);
  seed_ = seed;
  offset_ = offset;
  ++seed_epoch_;
}

PhiloxState Generator::reserve(uint64_t num_blocks) {
  std::lock_guard<std::mutex> lock(mu_);
  PhiloxState s{seed_, offset_};
  // Wraps after 2^64 blocks (2^70 bytes): the Philox counter space repeats, nothing breaks.
  offset_ += num_blocks;
  return s;
}

uint64_t Generator::next_u64() {
  PhiloxState s = reserve(1);
  return kernels::philox_u64(kernels::philox_block(s.seed, s.offset, 0), 0);
}

Generator& default_generator(Device device) {
  // A CUDA device past the visible count still gets its generator (seeding before any use, as
  // torch.manual_seed); only an index no per-device table has room for is refused.
  if (device.index < 0 || device.index >= kMaxDevicesPerType) [[unlikely]]
    check_device_exists(device, "default_generator");  // throws DeviceError
  DefaultGenerators& d = defaults();
  auto& slot = d.slots[static_cast<size_t>(device.flat_index())];
  if (Generator* g = slot.load(std::memory_order_acquire)) return *g;
  std::lock_guard<std::mutex> lock(d.mu);
  if (Generator* g = slot.load(std::memory_order_relaxed)) return *g;
  auto* g = new Generator(d.seed, device);
  slot.store(g, std::memory_order_release);
  return *g;
}

void manual_seed(uint64_t seed) {
  DefaultGenerators& d = defaults();
  std::lock_guard<std::mutex> lock(d.mu);
  d.seed = seed;  // defaults created later (e.g. a CUDA device first used after this) get it too
  for (auto& slot : d.slots) {
    if (Generator* g = slot.load(std::memory_order_relaxed)) g->manual_seed(seed);
  }
}

}  // namespace ember
