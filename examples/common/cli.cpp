#include "examples/common/cli.h"

#include <cerrno>
#include <cstdlib>

#include "core/error.h"

namespace ember_examples {

using ember::ValueError;

bool ArgReader::next() {
  if (++i_ >= argc_) return false;
  flag_ = argv_[i_];
  value_.clear();
  has_value_ = false;
  if (const size_t eq = flag_.find('='); flag_.rfind("--", 0) == 0 && eq != std::string::npos) {
    value_ = flag_.substr(eq + 1);
    flag_.resize(eq);
    has_value_ = true;
  }
  return true;
}

const std::string& ArgReader::value() {
  if (!has_value_) {
    EMBER_CHECK_T(ValueError, i_ + 1 < argc_, flag_, ": expected a value (see --help)");
    value_ = argv_[++i_];
    has_value_ = true;
  }
  return value_;
}

void ArgReader::no_value() const { EMBER_CHECK_T(ValueError, !has_value_, flag_, " takes no value"); }

int64_t parse_int(const std::string& flag, const std::string& v, int64_t min_value) {
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  EMBER_CHECK_T(ValueError, !v.empty() && end && *end == '\0' && errno == 0, flag, ": expected an integer, got '", v,
                "'");
  EMBER_CHECK_T(ValueError, x >= min_value, flag, ": expected at least ", min_value, ", got ", x);
  return x;
}

double parse_double(const std::string& flag, const std::string& v) {
  errno = 0;
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  EMBER_CHECK_T(ValueError, !v.empty() && end && *end == '\0' && errno == 0, flag, ": expected a number, got '", v,
                "'");
  return x;
}

bool parse_bool(const std::string& flag, const std::string& v) {
  if (v == "true" || v == "1") return true;
  if (v == "false" || v == "0") return false;
  EMBER_THROW(ValueError, flag, ": expected true or false, got '", v, "'");
}

bool parse_job_flag(ArgReader& args, const JobFlags& job) {
  const std::string& arg = args.flag();
  if (arg == "--ddp") {
    args.no_value();
    job.ddp = true;
  } else if (arg == "--backend") {
    job.backend = args.value();
    EMBER_CHECK_T(ValueError, job.backend == "tcp" || job.backend == "mpi" || job.backend == "nccl", arg,
                  ": expected tcp, mpi or nccl, got '", job.backend, "'");
  } else if (arg == "--timeout") {
    job.timeout_s = parse_int(arg, args.value(), 1);
  } else if (arg == "--seed") {
    job.seed = static_cast<uint64_t>(parse_int(arg, args.value(), 0));
  } else if (arg == "--threads") {
    job.threads = static_cast<int>(parse_int(arg, args.value(), 1));
  } else if (arg == "--resume") {
    args.no_value();
    job.resume = true;
  } else {
    return false;
  }
  return true;
}

}  // namespace ember_examples
