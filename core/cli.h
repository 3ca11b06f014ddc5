// ember's command lines, on CLI11: an App set up one way for ember-run, the examples and the
// benchmarks (a repeated flag's last value wins, defaults and value checks shown in a usage
// generated from the flags, help text wrapped), validators whose messages name what was expected
// and what arrived, and parse(), which turns CLI11's errors into ember::ValueError. Built as its
// own small library (ember_cli, no tensors) and not installed. An App is not thread-safe.
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ember::cli {

/// An App for `program`. `usage_tail` follows "Usage: program [OPTIONS]" (e.g. "program
/// [args...]" for a launcher); `description` is printed below the usage line.
std::unique_ptr<CLI::App> make_app(const std::string& program, const std::string& description,
                                   const std::string& usage_tail = "");

/// A decimal integer >= min_value ("expected an integer, got 'x'", "expected at least 1, got 0").
CLI::Validator at_least(int64_t min_value);
/// A decimal integer in [lo, hi].
CLI::Validator int_in(int64_t lo, int64_t hi);
/// A number (strtod syntax) in [lo, hi], or [lo, hi) when hi_open; `what` names the kind of
/// number in the message ("a probability").
CLI::Validator number_in(double lo, double hi, bool hi_open, const std::string& what);
/// A number > 0.
CLI::Validator positive();
/// One of `names` ("expected bf16 or fp16, got 'fp8'").
CLI::Validator one_of(std::vector<std::string> names);
/// Any text but "".
CLI::Validator not_empty();

/// Parses argv[1..] into the options `app` was given. Returns false when --help (or -h) was
/// asked for. Throws ember::ValueError with CLI11's message, which names the flag, for an unknown
/// flag, a stray argument, a missing or malformed value, or a value a validator refused; errors
/// thrown by the options' own callbacks pass through unchanged.
bool parse(CLI::App& app, int argc, const char* const* argv);

}  // namespace ember::cli
