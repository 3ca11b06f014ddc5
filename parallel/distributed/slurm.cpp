#include "parallel/distributed/slurm.h"

#include <cerrno>
#include <climits>
#include <cstdlib>

#include "core/error.h"

namespace ember::parallel {

namespace {

// More hosts than this from one list is a typo ("node[1-1000000000]"), not a cluster.
constexpr size_t kMaxHosts = 1'000'000;

// A recursive-descent reader over one host list; `pos_` is where the next read starts.
class HostlistParser {
 public:
  explicit HostlistParser(const std::string& text) : s_(text) {}

  std::vector<std::string> parse() {
    std::vector<std::string> hosts;
    if (s_.empty()) fail("a host name");
    while (true) {
      expand_host(hosts);
      if (pos_ == s_.size()) break;
      expect(',');
    }
    return hosts;
  }

 private:
  [[noreturn]] void fail(const std::string& expected) const {
    std::string got = "the end";
    if (pos_ < s_.size()) got = {'\'', s_[pos_], '\''};
    EMBER_THROW(ValueError, "expand_hostlist: in '", s_, "' at position ", pos_, ": expected ", expected, ", got ",
                got);
  }
  void expect(char c) {
    if (pos_ >= s_.size() || s_[pos_] != c) fail({'\'', c, '\''});
    ++pos_;
  }
  bool at(char c) const { return pos_ < s_.size() && s_[pos_] == c; }

  // One host expression up to a top-level ',' or the end: literal text and bracket groups.
  void expand_host(std::vector<std::string>& out) {
    std::vector<std::string> partial{""};
    const size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] != ',') {
      if (at('[')) {
        ++pos_;
        const auto numbers = bracket();
        std::vector<std::string> next;
        EMBER_CHECK_T(ValueError, partial.size() * numbers.size() <= kMaxHosts, "expand_hostlist: '", s_,
                      "' names more than ", kMaxHosts, " hosts");
        for (const auto& p : partial)
          for (const auto& n : numbers) next.push_back(p + n);
        partial.swap(next);
      } else if (at(']')) {
        fail("a host name character or '['");
      } else {
        for (auto& p : partial) p += s_[pos_];
        ++pos_;
      }
    }
    if (pos_ == start) fail("a host name");
    EMBER_CHECK_T(ValueError, out.size() + partial.size() <= kMaxHosts, "expand_hostlist: '", s_,
                  "' names more than ", kMaxHosts, " hosts");
    out.insert(out.end(), partial.begin(), partial.end());
  }

  // After '[': "a-b,c,..." up to ']'; each number keeps its written width (zero padding).
  std::vector<std::string> bracket() {
    std::vector<std::string> out;
    while (true) {
      const std::string lo = digits();
      std::string hi = lo;
      if (at('-')) {
        ++pos_;
        hi = digits();
      }
      const unsigned long long a = std::stoull(lo), b = std::stoull(hi);
      if (b < a) {
        std::string what = "a range whose end is not below its start (";
        what += lo;
        what += '-';
        what += hi;
        fail(what + ")");
      }
      EMBER_CHECK_T(ValueError, b - a < kMaxHosts && out.size() + (b - a) < kMaxHosts, "expand_hostlist: '", s_,
                    "' names more than ", kMaxHosts, " hosts");
      for (unsigned long long v = a; v <= b; ++v) {
        std::string n = std::to_string(v);
        if (n.size() < lo.size()) n.insert(0, lo.size() - n.size(), '0');
        out.push_back(std::move(n));
      }
      if (at(']')) {
        ++pos_;
        return out;
      }
      expect(',');
    }
  }

  std::string digits() {
    const size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    if (pos_ == start) fail("a number");
    if (pos_ - start > 18) {
      pos_ = start;
      fail("a number of at most 18 digits");
    }
    return s_.substr(start, pos_ - start);
  }

  const std::string& s_;
  size_t pos_ = 0;
};

const char* get(const char* name) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : nullptr;
}

// The first of the names that is set.
const char* first_set(std::initializer_list<const char*> names, const char** which) {
  for (const char* n : names)
    if (const char* v = get(n)) {
      *which = n;
      return v;
    }
  return nullptr;
}

std::optional<long long> int_of(std::initializer_list<const char*> names, long long lo, long long hi) {
  const char* name = nullptr;
  const char* v = first_set(names, &name);
  if (v == nullptr) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(v, &end, 10);
  EMBER_CHECK_T(ValueError, errno == 0 && end != v && *end == '\0', "init_process_group: environment variable ",
                name, "='", v, "' is not an integer");
  EMBER_CHECK_T(ValueError, x >= lo && x <= hi, "init_process_group: environment variable ", name, "=", x,
                " is out of range [", lo, ", ", hi, "]");
  return x;
}

std::optional<int> int32_of(std::initializer_list<const char*> names, int lo, int hi) {
  auto v = int_of(names, lo, hi);
  return v ? std::optional<int>(static_cast<int>(*v)) : std::nullopt;
}

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& hostlist) { return HostlistParser(hostlist).parse(); }

std::vector<int> expand_tasks_per_node(const std::string& spec) {
  std::vector<int> out;
  size_t pos = 0;
  auto fail = [&](const char* expected) {
    EMBER_THROW(ValueError, "expand_tasks_per_node: in '", spec, "' at position ", pos, ": expected ", expected);
  };
  auto number = [&]() -> long long {
    const size_t start = pos;
    while (pos < spec.size() && spec[pos] >= '0' && spec[pos] <= '9') ++pos;
    if (pos == start || pos - start > 9) fail("a number of 1-9 digits");
    return std::stoll(spec.substr(start, pos - start));
  };
  if (spec.empty()) fail("a task count");
  while (true) {
    const long long count = number();
    long long repeat = 1;
    if (pos < spec.size() && spec[pos] == '(') {
      ++pos;
      if (pos >= spec.size() || spec[pos] != 'x') fail("'x' after '('");
      ++pos;
      repeat = number();
      if (pos >= spec.size() || spec[pos] != ')') fail("')'");
      ++pos;
    }
    if (repeat < 1 || count > INT_MAX || out.size() + static_cast<size_t>(repeat) > kMaxHosts)
      fail("a task count and a repeat count of 1 or more, within bounds");
    out.insert(out.end(), static_cast<size_t>(repeat), static_cast<int>(count));
    if (pos == spec.size()) return out;
    if (spec[pos] != ',') fail("',' or '(xN)'");
    ++pos;
  }
}

int slurm_master_port(int64_t job_id, int64_t step_id) {
  const uint64_t mix = static_cast<uint64_t>(job_id) * 16 + static_cast<uint64_t>(step_id);
  return 15000 + static_cast<int>(mix % 20000);
}

SlurmStep read_slurm_step() {
  SlurmStep s;
  s.rank = int32_of({"SLURM_PROCID"}, 0, INT_MAX - 1);
  s.world_size = int32_of({"SLURM_NTASKS", "SLURM_NPROCS"}, 1, INT_MAX);
  s.local_rank = int32_of({"SLURM_LOCALID"}, 0, INT_MAX - 1);
  s.node_rank = int32_of({"SLURM_NODEID"}, 0, INT_MAX - 1);
  if (auto j = int_of({"SLURM_JOB_ID", "SLURM_JOBID"}, 0, LLONG_MAX / 32)) s.job_id = *j;
  // A batch step's id is not a number ("batch"); only numbers count.
  if (const char* v = get("SLURM_STEP_ID"); v != nullptr && *v >= '0' && *v <= '9')
    s.step_id = int_of({"SLURM_STEP_ID"}, 0, LLONG_MAX / 32).value_or(0);
  const char* name = nullptr;
  if (const char* list = first_set({"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}, &name)) {
    try {
      s.hosts = expand_hostlist(list);
    } catch (const ValueError& e) {
      EMBER_THROW(ValueError, "init_process_group: environment variable ", name, " is not a Slurm host list: ",
                  e.what());
    }
  }
  s.local_world_size = int32_of({"SLURM_NTASKS_PER_NODE"}, 1, INT_MAX);
  if (!s.local_world_size) {
    if (const char* spec = first_set({"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}, &name)) {
      std::vector<int> per_node;
      try {
        per_node = expand_tasks_per_node(spec);
      } catch (const ValueError& e) {
        EMBER_THROW(ValueError, "init_process_group: environment variable ", name, "='", spec,
                    "' is not Slurm's tasks-per-node notation: ", e.what());
      }
      const int node = s.node_rank.value_or(0);
      EMBER_CHECK_T(ValueError, static_cast<size_t>(node) < per_node.size(), "init_process_group: ", name, "='",
                    spec, "' lists ", per_node.size(), " nodes but SLURM_NODEID=", node);
      s.local_world_size = per_node[static_cast<size_t>(node)];
    }
  }
  return s;
}

}  // namespace ember::parallel
