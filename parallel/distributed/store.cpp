#include "parallel/distributed/store.h"

#include <algorithm>
#include <charconv>

#include "core/error.h"

namespace ember::parallel {

Store::Store(int64_t timeout_ms) : timeout_ms_(timeout_ms) {
  EMBER_CHECK_T(ValueError, timeout_ms > 0, "Store: timeout_ms must be positive, got ", timeout_ms);
}

Store::~Store() = default;

namespace {
void check_key(const char* op, const std::string& key) {
  EMBER_CHECK_T(ValueError, !key.empty(), "Store::", op, ": key must not be empty");
}
void check_timeout(const char* op, int64_t timeout_ms) {
  EMBER_CHECK_T(ValueError, timeout_ms > 0, "Store::", op, ": timeout_ms must be positive, got ",
                timeout_ms);
}
std::vector<uint8_t> to_bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string to_string(const std::vector<uint8_t>& v) { return {v.begin(), v.end()}; }
}  // namespace

void Store::set(const std::string& key, const std::vector<uint8_t>& value) {
  check_key("set", key);
  set_impl(key, value);
}

void Store::set(const std::string& key, const std::string& value) { set(key, to_bytes(value)); }

std::vector<uint8_t> Store::get(const std::string& key) { return get(key, timeout()); }

std::vector<uint8_t> Store::get(const std::string& key, int64_t timeout_ms) {
  check_key("get", key);
  check_timeout("get", timeout_ms);
  return get_impl(key, timeout_ms);
}

std::string Store::get_string(const std::string& key) { return to_string(get(key)); }

int64_t Store::add(const std::string& key, int64_t delta) {
  check_key("add", key);
  return add_impl(key, delta);
}

std::vector<uint8_t> Store::compare_set(const std::string& key, const std::vector<uint8_t>& expected,
                                        const std::vector<uint8_t>& desired) {
  check_key("compare_set", key);
  return compare_set_impl(key, expected, desired);
}

std::string Store::compare_set(const std::string& key, const std::string& expected,
                               const std::string& desired) {
  return to_string(compare_set(key, to_bytes(expected), to_bytes(desired)));
}

bool Store::check(const std::vector<std::string>& keys) {
  for (const auto& k : keys) check_key("check", k);
  return check_impl(keys);
}

void Store::wait(const std::vector<std::string>& keys) { wait(keys, timeout()); }

void Store::wait(const std::vector<std::string>& keys, int64_t timeout_ms) {
  for (const auto& k : keys) check_key("wait", k);
  check_timeout("wait", timeout_ms);
  if (keys.empty()) return;
  wait_impl(keys, timeout_ms);
}

bool Store::delete_key(const std::string& key) {
  check_key("delete_key", key);
  return delete_key_impl(key);
}

int64_t Store::num_keys() { return num_keys_impl(); }

void Store::set_timeout(int64_t timeout_ms) {
  check_timeout("set_timeout", timeout_ms);
  timeout_ms_.store(timeout_ms, std::memory_order_relaxed);
}

namespace detail {

int64_t parse_counter(const std::string& key, const std::vector<uint8_t>& value) {
  int64_t out = 0;
  const char* first = reinterpret_cast<const char*>(value.data());
  const char* last = first + value.size();
  auto [ptr, ec] = std::from_chars(first, last, out);
  EMBER_CHECK_T(ValueError, ec == std::errc() && ptr == last && !value.empty(), "Store::add: key '",
                key, "' holds a value that is not an integer counter (", value.size(), " bytes)");
  return out;
}

std::chrono::steady_clock::time_point deadline_after(int64_t timeout_ms) {
  constexpr int64_t kMaxMs = int64_t{100} * 365 * 24 * 3600 * 1000;
  return std::chrono::steady_clock::now() + std::chrono::milliseconds(std::clamp<int64_t>(timeout_ms, 0, kMaxMs));
}

std::vector<uint8_t> format_counter(int64_t value) { return to_bytes(std::to_string(value)); }

int64_t added_counter(const std::string& key, const std::vector<uint8_t>* current, int64_t delta) {
  const int64_t value = current != nullptr ? parse_counter(key, *current) : 0;
  int64_t sum = 0;
  EMBER_CHECK_T(ValueError, !__builtin_add_overflow(value, delta, &sum), "Store::add: key '", key, "' holds ", value,
                "; adding ", delta, " overflows the 64-bit counter");
  return sum;
}

std::string format_keys(const std::vector<std::string>& keys) {
  std::string out = "[";
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i) out += ", ";
    out += "'" + keys[i] + "'";
  }
  return out + "]";
}

CompareSetOutcome compare_set_rule(const std::vector<uint8_t>* current, const std::vector<uint8_t>& expected,
                                   const std::vector<uint8_t>& desired) {
  if ((current == nullptr && expected.empty()) || (current != nullptr && *current == expected)) return {true, &desired};
  // A missing key with a non-empty expected returns expected and stores nothing, as PyTorch does.
  return {false, current == nullptr ? &expected : current};
}

}  // namespace detail

}  // namespace ember::parallel
