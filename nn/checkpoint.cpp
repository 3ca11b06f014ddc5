#include "nn/checkpoint.h"

#include <cstdio>
#include <vector>

#include "core/generator.h"
#include "core/serialization.h"
#include "nn/detail/json.h"

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
    EMBER_THROW(ValueError, "load_checkpoint: ", path, ": malformed rng.cpu metadata");
  };
  EMBER_CHECK_T(ValueError, s.size() % 2 == 0, "load_checkpoint: ", path, ": malformed rng.cpu metadata");
  std::vector<uint8_t> out;
  for (size_t i = 0; i < s.size(); i += 2) out.push_back(static_cast<uint8_t>(nibble(s[i]) << 4 | nibble(s[i + 1])));
  return out;
}

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

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
      std::string params = "[";
      for (size_t i = 0; i < group.params.size(); ++i) {
        if (i) params += ",";
        params += std::to_string(group.params[i]);
      }
      params += "]";
      meta[prefix + "params"] = params;
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
  std::map<std::string, std::string> meta;
  auto tensors = load_safetensors(path, &meta);
  auto fmt = meta.find(kFormatKey);
  EMBER_CHECK_T(ValueError, fmt != meta.end() && fmt->second == kFormat, "load_checkpoint: ", path,
                " is not an ember checkpoint (metadata \"format\" is not \"", kFormat, "\")");

  StateDict model;
  for (auto& [k, t] : tensors) {
    if (starts_with(k, "model.")) model.emplace_back(k.substr(6), t);
  }

  optim::OptimizerStateDict osd;
  if (optimizer) {
    auto type = meta.find("optim.type");
    EMBER_CHECK_T(ValueError, type != meta.end(), "load_checkpoint: ", path, " holds no optimizer state");
    EMBER_CHECK_T(ValueError, type->second == optimizer->type_name(), "load_checkpoint: ", path, " holds ",
                  type->second, " state, the optimizer is ", optimizer->type_name());
    const int64_t num_groups = std::stoll(meta_at(meta, "optim.num_groups", path));
    for (int64_t g = 0; g < num_groups; ++g) {
      const std::string prefix = "optim." + std::to_string(g) + ".";
      optim::OptimizerStateDict::Group group;
      group.options = meta_at(meta, prefix + "options", path);
      auto params = detail::parse_json(meta_at(meta, prefix + "params", path), path + " " + prefix + "params");
      for (double v : params.as_numbers(prefix + "params")) {
        group.params.push_back(static_cast<int64_t>(v));
      }
      osd.param_groups.push_back(std::move(group));
    }
    for (auto& [k, t] : tensors) {
      if (!starts_with(k, "optim.")) continue;
      // optim.<group>.<index>.<key>
      size_t a = k.find('.', 6), b = a == std::string::npos ? a : k.find('.', a + 1);
      EMBER_CHECK_T(ValueError, b != std::string::npos, "load_checkpoint: ", path, ": malformed tensor name \"", k,
                    "\"");
      int64_t idx = std::stoll(k.substr(a + 1, b - a - 1));
      osd.state[idx][k.substr(b + 1)] = t;
    }
    // Check the optimizer's structure before modifying the module (the optimizer load itself is atomic).
    const auto& groups = optimizer->param_groups();
    EMBER_CHECK_T(ValueError, osd.param_groups.size() == groups.size(), "load_checkpoint: ", path, " has ",
                  osd.param_groups.size(), " optimizer parameter groups, the optimizer has ", groups.size());
    for (size_t g = 0; g < groups.size(); ++g) {
      EMBER_CHECK_T(ValueError, osd.param_groups[g].params.size() == groups[g].params().size(), "load_checkpoint: ",
                    path, ": optimizer group ", g, " has ", osd.param_groups[g].params.size(),
                    " parameters in the file, ", groups[g].params().size(), " in the optimizer");
      auto probe = groups[g].options().clone();
      probe->from_json(osd.param_groups[g].options);
      probe->validate();
    }
  }

  module.load_state_dict(model, options.strict);
  if (optimizer) optimizer->load_state_dict(osd);
  if (options.restore_rng_state) {
    default_generator(Device::cpu()).set_state(from_hex(meta_at(meta, "rng.cpu", path), path));
  }
  if (extra) {
    extra->clear();
    for (const auto& [k, v] : meta) {
      if (starts_with(k, "extra.")) (*extra)[k.substr(6)] = v;
    }
  }
}

}  // namespace ember::nn
