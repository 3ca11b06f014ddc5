#include "nn/container.h"

#include <algorithm>
#include <sstream>

namespace ember::nn {

namespace detail {
void print_children(std::ostream& os, const Module& m) {
  auto children = m.named_children();
  os << m.display_name() << "(";
  if (children.empty()) {
    os << ")";
    return;
  }
  os << "\n";
  for (const auto& [key, child] : children) {
    std::ostringstream cs;
    child->pretty_print(cs);
    std::string text = cs.str();
    // Indent continuation lines by two spaces, as PyTorch's _addindent does.
    std::string indented;
    for (char c : text) {
      indented += c;
      if (c == '\n') indented += "  ";
    }
    os << "  (" << key << "): " << indented << "\n";
  }
  os << ")";
}
}  // namespace detail

namespace {
size_t checked_index(int64_t index, size_t size, const char* what) {
  const int64_t n = static_cast<int64_t>(size);
  EMBER_CHECK_T(IndexError, index >= -n && index < n, what, ": index ", index, " is out of range (size ", n, ")");
  return static_cast<size_t>(index < 0 ? index + n : index);
}
}  // namespace

// ---- Sequential -------------------------------------------------------------------------------

Tensor SequentialImpl::forward(const Tensor& input) {
  Tensor x = input;
  for (auto& e : entries_) x = e.forward(*e.module, x);
  return x;
}

std::shared_ptr<Module> SequentialImpl::operator[](int64_t index) const {
  return entries_[checked_index(index, entries_.size(), "Sequential")].module;
}

std::shared_ptr<Module> SequentialImpl::clone(std::optional<Device> device) const {
  auto copy = std::make_shared<SequentialImpl>();
  for (size_t i = 0; i < entries_.size(); ++i) {
    auto child = entries_[i].module->clone(device);
    copy->register_module(children_[i].first, child);
    copy->entries_.push_back({child, entries_[i].forward});
  }
  copy->training_ = training_;
  return copy;
}

// ---- ModuleList -------------------------------------------------------------------------------

void ModuleListImpl::reregister() {
  clear_registrations();
  for (size_t i = 0; i < modules_.size(); ++i) register_module(std::to_string(i), modules_[i]);
}

void ModuleListImpl::push_back(std::shared_ptr<Module> m) {
  EMBER_CHECK_T(ValueError, m != nullptr, "ModuleList: cannot append a null module");
  register_module(std::to_string(modules_.size()), m);
  modules_.push_back(std::move(m));
}

void ModuleListImpl::extend(const ModuleListImpl& other) {
  auto items = other.modules_;  // other may be *this
  for (auto& m : items) push_back(m);
}

void ModuleListImpl::insert(int64_t index, std::shared_ptr<Module> m) {
  EMBER_CHECK_T(ValueError, m != nullptr, "ModuleList: cannot insert a null module");
  const int64_t n = static_cast<int64_t>(modules_.size());
  EMBER_CHECK_T(IndexError, index >= -n && index <= n, "ModuleList: insert index ", index, " is out of range (size ",
                n, ")");
  if (index < 0) index += n;
  modules_.insert(modules_.begin() + index, std::move(m));
  reregister();
}

std::shared_ptr<Module> ModuleListImpl::operator[](int64_t index) const {
  return modules_[checked_index(index, modules_.size(), "ModuleList")];
}

std::shared_ptr<Module> ModuleListImpl::clone(std::optional<Device> device) const {
  auto copy = std::make_shared<ModuleListImpl>();
  for (const auto& m : modules_) copy->push_back(m->clone(device));
  copy->training_ = training_;
  return copy;
}

// ---- ModuleDict -------------------------------------------------------------------------------

ModuleDictImpl::ModuleDictImpl(const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& items)
    : Cloneable("ModuleDict") {
  update(items);
}

void ModuleDictImpl::reregister() {
  clear_registrations();
  for (auto& [k, m] : items_) register_module(k, m);
}

void ModuleDictImpl::insert(const std::string& key, std::shared_ptr<Module> m) {
  EMBER_CHECK_T(ValueError, m != nullptr, "ModuleDict: module \"", key, "\" is null");
  auto it = std::find_if(items_.begin(), items_.end(), [&](const auto& p) { return p.first == key; });
  if (it != items_.end()) {
    it->second = std::move(m);
    reregister();
    return;
  }
  register_module(key, m);
  items_.emplace_back(key, std::move(m));
}

void ModuleDictImpl::update(const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& items) {
  for (const auto& [k, m] : items) insert(k, m);
}

std::shared_ptr<Module> ModuleDictImpl::pop(const std::string& key) {
  auto it = std::find_if(items_.begin(), items_.end(), [&](const auto& p) { return p.first == key; });
  EMBER_CHECK_T(IndexError, it != items_.end(), "ModuleDict: KeyError: '", key, "'");
  auto m = it->second;
  items_.erase(it);
  reregister();
  return m;
}

bool ModuleDictImpl::contains(const std::string& key) const {
  return std::any_of(items_.begin(), items_.end(), [&](const auto& p) { return p.first == key; });
}

std::shared_ptr<Module> ModuleDictImpl::operator[](const std::string& key) const {
  for (const auto& [k, m] : items_) {
    if (k == key) return m;
  }
  EMBER_THROW(IndexError, "ModuleDict: KeyError: '", key, "'");
}

std::vector<std::string> ModuleDictImpl::keys() const {
  std::vector<std::string> out;
  for (const auto& [k, m] : items_) out.push_back(k);
  return out;
}

std::vector<std::shared_ptr<Module>> ModuleDictImpl::values() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [k, m] : items_) out.push_back(m);
  return out;
}

std::shared_ptr<Module> ModuleDictImpl::clone(std::optional<Device> device) const {
  auto copy = std::make_shared<ModuleDictImpl>();
  for (const auto& [k, m] : items_) copy->insert(k, m->clone(device));
  copy->training_ = training_;
  return copy;
}

}  // namespace ember::nn
