// Store: the key-value rendezvous that processes (or threads) of a job use to find each
// other and exchange small blobs (addresses, unique ids, counters) before and beside the
// collectives. Implementations: HashStore (in-process), FileStore (shared file),
// TCPStore (server + clients), PrefixStore (a namespace over another store).
// Every Store is thread-safe: any number of threads may call any method concurrently.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace ember::parallel {

/// Values are opaque bytes. add() keeps its counter as the decimal text of the number
/// ("42"), like PyTorch's stores, so get() on a counter returns that text.
class Store {
 public:
  static constexpr int64_t kDefaultTimeoutMs = 300'000;  // 5 minutes, as torch.distributed

  explicit Store(int64_t timeout_ms = kDefaultTimeoutMs);
  virtual ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  /// Sets key to value, replacing any old value, and wakes everyone waiting for key.
  void set(const std::string& key, const std::vector<uint8_t>& value);
  void set(const std::string& key, const std::string& value);

  /// Returns key's value, waiting up to timeout() (or timeout_ms) for it to appear.
  /// Throws TimeoutError naming the key and the timeout.
  std::vector<uint8_t> get(const std::string& key);
  std::vector<uint8_t> get(const std::string& key, int64_t timeout_ms);
  std::string get_string(const std::string& key);

  /// Adds delta to the integer counter at key (a missing key counts as 0) and returns
  /// the new value. Throws ValueError when key holds something that is not an integer.
  int64_t add(const std::string& key, int64_t delta);

  /// Atomically: if key is missing and expected is empty, or key's value equals
  /// expected, sets key to desired. Returns key's value afterwards (for a missing key and
  /// a non-empty expected, returns expected and stores nothing, as PyTorch does).
  std::vector<uint8_t> compare_set(const std::string& key, const std::vector<uint8_t>& expected,
                                   const std::vector<uint8_t>& desired);
  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired);

  /// True when every key exists right now; never waits.
  bool check(const std::vector<std::string>& keys);

  /// Waits until every key exists: up to timeout() or timeout_ms milliseconds, then
  /// throws TimeoutError naming the missing keys.
  void wait(const std::vector<std::string>& keys);
  void wait(const std::vector<std::string>& keys, int64_t timeout_ms);

  /// Removes key; returns whether it existed.
  bool delete_key(const std::string& key);

  /// Number of user keys in the store (internal bookkeeping keys are not counted).
  int64_t num_keys();

  /// Default timeout in milliseconds for get() and wait(); must be positive.
  void set_timeout(int64_t timeout_ms);
  int64_t timeout() const { return timeout_ms_.load(std::memory_order_relaxed); }

 protected:
  // The implementation hooks behind the public API; same contracts as above. The public
  // wrappers validate arguments (non-empty keys, positive timeouts) before calling them.
  virtual void set_impl(const std::string& key, const std::vector<uint8_t>& value) = 0;
  virtual std::vector<uint8_t> get_impl(const std::string& key, int64_t timeout_ms) = 0;
  virtual int64_t add_impl(const std::string& key, int64_t delta) = 0;
  virtual std::vector<uint8_t> compare_set_impl(const std::string& key,
                                                const std::vector<uint8_t>& expected,
                                                const std::vector<uint8_t>& desired) = 0;
  virtual bool check_impl(const std::vector<std::string>& keys) = 0;
  virtual void wait_impl(const std::vector<std::string>& keys, int64_t timeout_ms) = 0;
  virtual bool delete_key_impl(const std::string& key) = 0;
  virtual int64_t num_keys_impl() = 0;

 private:
  std::atomic<int64_t> timeout_ms_;
};

/// Declares the eight hooks above as overrides, in the protected section of a Store
/// implementation, so their signatures are written once (here and in Store); the implementation
/// defines all eight.
#define EMBER_STORE_HOOKS_OVERRIDE                                                                       \
  void set_impl(const std::string& key, const std::vector<uint8_t>& value) override;                     \
  std::vector<uint8_t> get_impl(const std::string& key, int64_t timeout_ms) override;                    \
  int64_t add_impl(const std::string& key, int64_t delta) override;                                      \
  std::vector<uint8_t> compare_set_impl(const std::string& key, const std::vector<uint8_t>& expected,    \
                                        const std::vector<uint8_t>& desired) override;                   \
  bool check_impl(const std::vector<std::string>& keys) override;                                        \
  void wait_impl(const std::vector<std::string>& keys, int64_t timeout_ms) override;                     \
  bool delete_key_impl(const std::string& key) override;                                                 \
  int64_t num_keys_impl() override


namespace detail {
/// Parses a counter written by add(); throws ValueError naming key otherwise.
int64_t parse_counter(const std::string& key, const std::vector<uint8_t>& value);
std::vector<uint8_t> format_counter(int64_t value);
/// The counter add(key, delta) leaves: `current` parsed (0 when null) plus delta. Throws
/// ValueError naming key when current is not a counter or the sum overflows 64 bits; every
/// store's add goes through it, so an add that fails changes nothing.
int64_t added_counter(const std::string& key, const std::vector<uint8_t>* current, int64_t delta);
/// now + timeout_ms, saturating (about a century at most) instead of overflowing, so a
/// caller may pass a huge timeout to mean "practically forever".
std::chrono::steady_clock::time_point deadline_after(int64_t timeout_ms);
/// "['a', 'b']" for error messages.
std::string format_keys(const std::vector<std::string>& keys);
/// compare_set's rule, for every store that keeps its own keys (HashStore, FileStore,
/// TCPStoreServer): `current` is the key's value, null when the key is absent. `write`: store
/// `desired`; `result`: what compare_set returns (one of desired, expected, *current).
struct CompareSetOutcome {
  bool write = false;
  const std::vector<uint8_t>* result = nullptr;
};
CompareSetOutcome compare_set_rule(const std::vector<uint8_t>* current, const std::vector<uint8_t>& expected,
                                   const std::vector<uint8_t>& desired);
}  // namespace detail

}  // namespace ember::parallel
