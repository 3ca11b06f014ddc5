// What the examples' hand-written option parsers share: ArgReader walks argv as `--flag value`
// or `--flag=value`, the value parsers check one value, and parse_job_flag reads the flags every
// training job takes. Each throws ember::ValueError naming the flag, what was expected and what
// arrived. ArgReader is a plain cursor (not thread-safe).
#pragma once
#include <cstdint>
#include <string>

namespace ember_examples {

/// for (ArgReader a(argc, argv); a.next();) { if (a.flag() == "--epochs") n = parse_int(a.flag(), a.value(), 1); ... }
class ArgReader {
 public:
  ArgReader(int argc, const char* const* argv) : argc_(argc), argv_(argv) {}
  /// Moves to the next argument; false after the last.
  bool next();
  /// The argument without any "=value" part ("--epochs").
  const std::string& flag() const { return flag_; }
  /// The argument exactly as given.
  const char* raw() const { return argv_[i_]; }
  /// The flag's value: after '=', else the next argument (consumed). ValueError when there is none.
  const std::string& value();
  /// For a switch: ValueError when it was given "=value".
  void no_value() const;

 private:
  int argc_;
  const char* const* argv_;
  int i_ = 0;
  std::string flag_, value_;
  bool has_value_ = false;
};

/// A decimal integer >= min_value.
int64_t parse_int(const std::string& flag, const std::string& v, int64_t min_value);
/// A floating-point number (strtod syntax).
double parse_double(const std::string& flag, const std::string& v);
/// true | 1 | false | 0.
bool parse_bool(const std::string& flag, const std::string& v);

/// Where parse_job_flag writes: the fields of an example's options.
struct JobFlags {
  bool& ddp;             // --ddp
  std::string& backend;  // --backend tcp | mpi | nccl
  int64_t& timeout_s;    // --timeout S, at least 1
  uint64_t& seed;        // --seed N, at least 0
  int& threads;          // --threads N, at least 1
  bool& resume;          // --resume
};

/// When the reader's current flag is one of JobFlags', reads its value into `job` and returns
/// true; otherwise returns false, reading nothing.
bool parse_job_flag(ArgReader& args, const JobFlags& job);

}  // namespace ember_examples
