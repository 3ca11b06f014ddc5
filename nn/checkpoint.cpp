#include "nn/checkpoint.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/generator.h"
#include "core/serialization.h"

namespace ember::nn {

namespace {
constexpr const char* kFormatKey = "format";
constexpr const char* kFormat = "ember.checkpoint.v1";

std::string to_hex(const std::vector<uint8_t>& bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : bytes) {
    s += kDigits[b >> 4];
    s += kDigits[b & 15];
  }
  return s;
}

std::vector<uint8_t> from_hex(const std::string& s, const std::string& path) {
  auto nibble = [&](char c) -> uint8_t {
    if (c >= '0' && c <= '9') return static_cast<uint8_t>(c - '0');
    if (c >= 'a' && c <= 'f') return static_cast<uint8_t>(c - 'a' + 10);
    EMBER_THROW(ValueError, "load_checkpoint: ", path, ": metadata \"rng.cpu\" is not lowercase hex (found '", c,
                "')");
  };
  EMBER_CHECK_T(ValueError, s.size() % 2 == 0, "load_checkpoint: ", path,
                ": metadata \"rng.cpu\" has an odd number of hex digits (", s.size(), ")");
  std::vector<uint8_t> out;
  for (size_t i = 0; i < s.size(); i += 2) out.push_back(static_cast<uint8_t>(nibble(s[i]) << 4 | nibble(s[i + 1])));
  return out;
}

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

// Note [Checkpoint loads are all or nothing]
// load_checkpoint first reads and checks everything it will apply: the module's state_dict
// (Module::validate_state_dict), the optimizer's metadata and state (counts and indices parsed
// strictly, then Optimizer::validate_state_dict, which includes each optimizer's
// check_param_state, so a loaded state cannot fail halfway through a later step()), and the RNG
// state. Only then does it change the module, the optimizer and the generator, in steps that
// cannot fail on validated input. Every error is a ValueError naming the file and the key.

/// A non-negative decimal integer (digits only) from metadata or a tensor name; ValueError naming `key`.
int64_t parse_count(const std::string& text, const std::string& key, const std::string& path) {
  int64_t v = -1;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  EMBER_CHECK_T(ValueError, !text.empty() && ec == std::errc() && ptr == end && v >= 0, "load_checkpoint: ", path,
                ": \"", key, "\" must hold a non-negative integer, got \"", text, "\"");
  return v;
}

const std::string& meta_at(const std::map<std::string, std::string>& meta, const std::string& key,
                           const std::string& path) {
  auto it = meta.find(key);
  EMBER_CHECK_T(ValueError, it != meta.end(), "load_checkpoint: ", path, ": missing metadata \"", key, "\"");
  return it->second;
}
}  // namespace

void save_checkpoint(const std::string& path, const Module& module, const optim::Optimizer* optimizer,
                     const std::map<std::string, std::string>& extra) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, std::string> meta;
  meta[kFormatKey] = kFormat;
  for (const auto& [k, t] : module.state_dict()) tensors.emplace_back("model." + k, t);
  if (optimizer) {
    optim::OptimizerStateDict sd = optimizer->state_dict();
    meta["optim.type"] = optimizer->type_name();
    meta["optim.num_groups"] = std::to_string(sd.param_groups.size());
    for (size_t g = 0; g < sd.param_groups.size(); ++g) {
      const auto& group = sd.param_groups[g];
      const std::string prefix = "optim." + std::to_string(g) + ".";
      meta[prefix + "options"] = group.options;
      meta[prefix + "params"] = nlohmann::json(group.params).dump();
      for (int64_t idx : group.params) {
        auto it = sd.state.find(idx);
        if (it == sd.state.end()) continue;
        for (const auto& [key, t] : it->second) {
          tensors.emplace_back(prefix + std::to_string(idx) + "." + key, t);
        }
      }
    }
  }
  meta["rng.cpu"] = to_hex(default_generator(Device::cpu()).get_state());
  for (const auto& [k, v] : extra) meta["extra." + k] = v;
  save_safetensors(path, tensors, meta);
}

void load_checkpoint(const std::string& path, Module& module, optim::Optimizer* optimizer,
                     std::map<std::string, std::string>* extra, const LoadCheckpointOptions& options) {
  // See Note [Checkpoint loads are all or nothing].
  std::map<std::string, std::string> meta;
  auto tensors = load_safetensors(path, &meta);
  auto fmt = meta.find(kFormatKey);
  EMBER_CHECK_T(ValueError, fmt != meta.end() && fmt->second == kFormat, "load_checkpoint: ", path,
                " is not an ember checkpoint (metadata \"format\" is not \"", kFormat, "\")");

  // 1. Read and check everything.
  StateDict model;
  for (auto& [k, t] : tensors) {
    if (starts_with(k, "model.")) model.emplace_back(k.substr(6), t);
  }
  module.validate_state_dict(model, options.strict);

  optim::OptimizerStateDict osd;
  if (optimizer) {
    auto type = meta.find("optim.type");
    EMBER_CHECK_T(ValueError, type != meta.end(), "load_checkpoint: ", path, " holds no optimizer state");
    EMBER_CHECK_T(ValueError, type->second == optimizer->type_name(), "load_checkpoint: ", path, " holds ",
                  type->second, " state, the optimizer is ", optimizer->type_name());
    const auto& groups = optimizer->param_groups();
    const int64_t num_groups = parse_count(meta_at(meta, "optim.num_groups", path), "optim.num_groups", path);
    EMBER_CHECK_T(ValueError, num_groups == static_cast<int64_t>(groups.size()), "load_checkpoint: ", path, " has ",
                  num_groups, " optimizer parameter groups (metadata \"optim.num_groups\"), the optimizer has ",
                  groups.size());
    for (int64_t g = 0; g < num_groups; ++g) {
      const std::string prefix = "optim." + std::to_string(g) + ".";
      optim::OptimizerStateDict::Group group;
      group.options = meta_at(meta, prefix + "options", path);
      const std::string key = prefix + "params";
      nlohmann::json params;
      try {
        params = nlohmann::json::parse(meta_at(meta, key, path));
      } catch (const nlohmann::json::parse_error& e) {
        EMBER_THROW(ValueError, "load_checkpoint: ", path, ": metadata \"", key, "\" is not JSON (", e.what(), ")");
      }
      EMBER_CHECK_T(ValueError, params.is_array(), "load_checkpoint: ", path, ": metadata \"", key,
                    "\" must list parameter indices, got ", params.dump());
      for (const auto& v : params) {
        // JSON integers only: a float such as 1e300 has no exact int64.
        EMBER_CHECK_T(ValueError, v.is_number_integer() && v.get<int64_t>() >= 0, "load_checkpoint: ", path,
                      ": metadata \"", key, "\" must list parameter indices (integers >= 0), got ", v.dump());
        group.params.push_back(v.get<int64_t>());
      }
      EMBER_CHECK_T(ValueError, group.params.size() == groups[static_cast<size_t>(g)].params().size(),
                    "load_checkpoint: ", path, ": optimizer group ", g, " has ", group.params.size(),
                    " parameters in the file (metadata \"", key, "\"), ", groups[static_cast<size_t>(g)].params().size(),
                    " in the optimizer");
      osd.param_groups.push_back(std::move(group));
    }
    for (auto& [k, t] : tensors) {
      if (!starts_with(k, "optim.")) continue;
      // optim.<group>.<index>.<key>
      size_t a = k.find('.', 6), b = a == std::string::npos ? a : k.find('.', a + 1);
      EMBER_CHECK_T(ValueError, b != std::string::npos, "load_checkpoint: ", path, ": malformed tensor name \"", k,
                    "\" (expected optim.<group>.<index>.<key>)");
      const int64_t idx = parse_count(k.substr(a + 1, b - a - 1), k, path);
      osd.state[idx][k.substr(b + 1)] = t;
    }
    try {
      optimizer->validate_state_dict(osd);
    } catch (const ValueError& e) {
      EMBER_THROW(ValueError, "load_checkpoint: ", path, ": ", e.what());
    }
  }

  std::vector<uint8_t> rng_state;
  if (options.restore_rng_state) {
    rng_state = from_hex(meta_at(meta, "rng.cpu", path), path);
    const size_t want = default_generator(Device::cpu()).get_state().size();
    EMBER_CHECK_T(ValueError, rng_state.size() == want, "load_checkpoint: ", path, ": metadata \"rng.cpu\" holds ",
                  rng_state.size(), " bytes, a generator state is ", want);
  }

  // 2. Change things. Each step below was validated above and cannot fail.
  module.load_state_dict(model, options.strict);
  if (optimizer) optimizer->load_state_dict(osd);
  if (options.restore_rng_state) default_generator(Device::cpu()).set_state(rng_state);
  if (extra) {
    extra->clear();
    for (const auto& [k, v] : meta) {
      if (starts_with(k, "extra.")) (*extra)[k.substr(6)] = v;
    }
  }
}

}  // namespace ember::nn
