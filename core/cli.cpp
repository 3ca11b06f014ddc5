#include "core/cli.h"

#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "core/error.h"

namespace ember::cli {

namespace {

constexpr size_t kHelpWidth = 100;  // columns of the whole help text
constexpr size_t kNameWidth = 30;   // the flags' column

// `text` with its spaces turned into line breaks so that no line passes `width` (a longer word
// keeps its own line).
std::string wrap(const std::string& text, size_t width) {
  std::string out;
  size_t line = 0;
  std::istringstream words(text);
  for (std::string word; words >> word;) {
    if (line > 0 && line + 1 + word.size() > width) {
      out += '\n';
      line = 0;
    } else if (line > 0) {
      out += ' ';
      ++line;
    }
    out += word;
    line += word.size();
  }
  return out;
}

// CLI11's help with the usage line first, then the description, and descriptions wrapped.
class Formatter : public CLI::Formatter {
 public:
  explicit Formatter(std::string usage_tail) : usage_tail_(std::move(usage_tail)) { column_width(kNameWidth); }
  std::string make_description(const CLI::App*) const override { return {}; }
  std::string make_usage(const CLI::App* app, std::string name) const override {
    std::string usage = "usage: " + name + " [OPTIONS]" + (usage_tail_.empty() ? "" : " " + usage_tail_) + "\n";
    if (!app->get_description().empty()) usage += "\n" + wrap(app->get_description(), kHelpWidth) + "\n";
    return usage;
  }
  std::string make_option_desc(const CLI::Option* opt) const override {
    return wrap(opt->get_description(), kHelpWidth - kNameWidth);
  }

 private:
  std::string usage_tail_;
};

// "" when `v` is a whole decimal integer (written to `out`), else the message.
std::string to_int(const std::string& v, int64_t& out) {
  errno = 0;
  char* end = nullptr;
  out = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || end == nullptr || *end != '\0' || errno != 0) return "expected an integer, got '" + v + "'";
  return {};
}

std::string to_double(const std::string& v, double& out) {
  errno = 0;
  char* end = nullptr;
  out = std::strtod(v.c_str(), &end);
  if (v.empty() || end == nullptr || *end != '\0' || errno != 0) return "expected a number, got '" + v + "'";
  return {};
}

std::string text(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}

}  // namespace

std::unique_ptr<CLI::App> make_app(const std::string& program, const std::string& description,
                                   const std::string& usage_tail) {
  auto app = std::make_unique<CLI::App>(description, program);
  // A repeated flag: the last one wins, as with most Unix tools.
  app->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->always_capture_default();
  app->formatter(std::make_shared<Formatter>(usage_tail));
  return app;
}

CLI::Validator at_least(int64_t min_value) {
  return CLI::Validator(
      [min_value](std::string& v) -> std::string {
        int64_t x = 0;
        if (std::string e = to_int(v, x); !e.empty()) return e;
        if (x < min_value) return "expected at least " + std::to_string(min_value) + ", got " + std::to_string(x);
        return {};
      },
      ">= " + std::to_string(min_value));
}

CLI::Validator int_in(int64_t lo, int64_t hi) {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& v) -> std::string {
        int64_t x = 0;
        if (std::string e = to_int(v, x); !e.empty()) return e;
        if (x < lo || x > hi) return "expected an integer in " + range + ", got " + v;
        return {};
      },
      "in " + range);
}

CLI::Validator number_in(double lo, double hi, bool hi_open, const std::string& what) {
  const std::string range = "[" + text(lo) + ", " + text(hi) + (hi_open ? ")" : "]");
  return CLI::Validator(
      [=](std::string& v) -> std::string {
        double x = 0;
        if (std::string e = to_double(v, x); !e.empty()) return e;
        if (!(x >= lo && (hi_open ? x < hi : x <= hi))) return "expected " + what + " in " + range + ", got " + v;
        return {};
      },
      "in " + range);
}

CLI::Validator positive() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        double x = 0;
        if (std::string e = to_double(v, x); !e.empty()) return e;
        if (!(x > 0)) return "expected a positive number, got " + v;
        return {};
      },
      "> 0");
}

CLI::Validator one_of(std::vector<std::string> names) {
  std::string listed, bar;
  for (size_t i = 0; i < names.size(); ++i) {
    listed += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
    bar += (i == 0 ? "" : "|") + names[i];
  }
  return CLI::Validator(
      [names, listed](std::string& v) -> std::string {
        for (const auto& n : names)
          if (v == n) return {};
        return "expected " + listed + ", got '" + v + "'";
      },
      bar);
}

CLI::Validator not_empty() {
  return CLI::Validator([](std::string& v) -> std::string { return v.empty() ? "expected a non-empty value" : ""; },
                        "");
}

bool parse(CLI::App& app, int argc, const char* const* argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    return false;
  } catch (const CLI::ParseError& e) {
    EMBER_THROW(ValueError, e.what());
  }
  return true;
}

}  // namespace ember::cli
