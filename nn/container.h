// Containers: Sequential (chains Tensor -> Tensor modules), ModuleList (indexed) and ModuleDict
// (keyed, insertion-ordered), PyTorch's nn.Sequential / nn.ModuleList / nn.ModuleDict. They own
// their children through shared_ptr; clone() deep-copies every child (with the child's own
// clone(), so no parameter is re-initialized). Not thread-safe (Modules).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "nn/module.h"
#include "nn/module_holder.h"

namespace ember::nn {

namespace detail {
/// Prints `m` as a container body: "Name(\n  (key): child\n)" with nested lines indented.
void print_children(std::ostream& os, const Module& m);
template <class M>
concept TensorForward = requires(M& m, const Tensor& x) {
  { m.forward(x) } -> std::convertible_to<Tensor>;
};
template <class M>
  requires std::is_base_of_v<Module, std::decay_t<M>>
std::shared_ptr<std::decay_t<M>> as_shared(M&& m) {
  return std::make_shared<std::decay_t<M>>(std::forward<M>(m));
}
template <class Impl>
std::shared_ptr<Impl> as_shared(const ModuleHolder<Impl>& m) {
  return m.ptr();
}
template <class M>
std::shared_ptr<M> as_shared(std::shared_ptr<M> m) {
  return m;
}
}  // namespace detail

class SequentialImpl : public Cloneable<SequentialImpl> {
 public:
  SequentialImpl() : Cloneable("Sequential") {}
  /// Sequential(std::make_shared<Linear>(2, 3), ReLU(), ...): shared_ptrs or module values. A
  /// module value is copied into a new shared_ptr; the copy shares its parameter tensors with
  /// the value passed (as LibTorch's module holders do); pass a temporary or a shared_ptr.
  template <class... Ms>
    requires(sizeof...(Ms) > 0 && (!std::is_same_v<std::decay_t<Ms>, SequentialImpl> && ...))
  explicit SequentialImpl(Ms&&... modules) : Cloneable("Sequential") {
    (push_back(std::forward<Ms>(modules)), ...);
  }

  /// Appends a module whose forward takes and returns a Tensor; named "0", "1", ...
  template <class M>
    requires detail::TensorForward<M>
  void push_back(std::shared_ptr<M> m) {
    push_back(std::to_string(entries_.size()), std::move(m));
  }
  template <class M>
    requires(detail::TensorForward<std::decay_t<M>> && std::is_base_of_v<Module, std::decay_t<M>>)
  void push_back(M&& m) {
    push_back(detail::as_shared(std::forward<M>(m)));
  }
  /// A module holder (nn::Linear(2, 3), an EMBER_MODULE): its module, shared.
  template <class Impl>
    requires detail::TensorForward<Impl>
  void push_back(const ModuleHolder<Impl>& m) {
    push_back(m.ptr());
  }
  template <class M>
    requires detail::TensorForward<M>
  void push_back(const std::string& name, std::shared_ptr<M> m) {
    register_module(name, m);
    entries_.push_back({m, [](Module& mod, const Tensor& x) -> Tensor { return static_cast<M&>(mod).forward(x); }});
  }

  /// Runs the children in order. An empty Sequential returns its input.
  Tensor forward(const Tensor& input);

  size_t size() const { return entries_.size(); }
  bool is_empty() const { return entries_.empty(); }
  /// Throws IndexError when out of range; negative indices count from the end.
  std::shared_ptr<Module> operator[](int64_t index) const;
  template <class M>
  std::shared_ptr<M> ptr(int64_t index) const {
    auto m = std::dynamic_pointer_cast<M>((*this)[index]);
    EMBER_CHECK_T(TypeError, m != nullptr, "Sequential: module ", index, " is not of the requested type");
    return m;
  }

  void reset() override {}
  std::shared_ptr<Module> clone(std::optional<Device> device = std::nullopt) const override;
  void pretty_print(std::ostream& os) const override { detail::print_children(os, *this); }

 private:
  struct Entry {
    std::shared_ptr<Module> module;
    std::function<Tensor(Module&, const Tensor&)> forward;  // stateless: casts and calls forward
  };
  std::vector<Entry> entries_;
};
/// LibTorch's module holder of SequentialImpl (nn/module_holder.h).
EMBER_MODULE(Sequential);

class ModuleListImpl : public Cloneable<ModuleListImpl> {
 public:
  ModuleListImpl() : Cloneable("ModuleList") {}
  template <class... Ms>
    requires(sizeof...(Ms) > 0 && (!std::is_same_v<std::decay_t<Ms>, ModuleListImpl> && ...))
  explicit ModuleListImpl(Ms&&... modules) : Cloneable("ModuleList") {
    (push_back(detail::as_shared(std::forward<Ms>(modules))), ...);
  }

  void push_back(std::shared_ptr<Module> m);
  /// A module holder (nn::Linear(2, 3), an EMBER_MODULE): its module, shared.
  template <class Impl>
  void push_back(const ModuleHolder<Impl>& m) {
    push_back(std::shared_ptr<Module>(m.ptr()));
  }
  void extend(const ModuleListImpl& other);
  /// Inserts before `index` (0..size()); children keep PyTorch's "0", "1", ... names.
  void insert(int64_t index, std::shared_ptr<Module> m);

  size_t size() const { return modules_.size(); }
  bool is_empty() const { return modules_.empty(); }
  std::shared_ptr<Module> operator[](int64_t index) const;
  template <class M>
  std::shared_ptr<M> ptr(int64_t index) const {
    auto m = std::dynamic_pointer_cast<M>((*this)[index]);
    EMBER_CHECK_T(TypeError, m != nullptr, "ModuleList: module ", index, " is not of the requested type");
    return m;
  }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

  void reset() override {}
  std::shared_ptr<Module> clone(std::optional<Device> device = std::nullopt) const override;
  void pretty_print(std::ostream& os) const override { detail::print_children(os, *this); }

 private:
  void reregister();
  std::vector<std::shared_ptr<Module>> modules_;
};
/// LibTorch's module holder of ModuleListImpl (nn/module_holder.h).
EMBER_MODULE(ModuleList);

class ModuleDictImpl : public Cloneable<ModuleDictImpl> {
 public:
  ModuleDictImpl() : Cloneable("ModuleDict") {}
  explicit ModuleDictImpl(const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& items);

  /// Inserts or replaces (keeping the position of an existing key).
  void insert(const std::string& key, std::shared_ptr<Module> m);
  template <class Impl>
  void insert(const std::string& key, const ModuleHolder<Impl>& m) {
    insert(key, std::shared_ptr<Module>(m.ptr()));
  }
  void update(const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& items);
  /// Removes and returns the module; throws IndexError ("KeyError") when absent.
  std::shared_ptr<Module> pop(const std::string& key);
  bool contains(const std::string& key) const;
  /// Throws IndexError when absent.
  std::shared_ptr<Module> operator[](const std::string& key) const;
  template <class M>
  std::shared_ptr<M> ptr(const std::string& key) const {
    auto m = std::dynamic_pointer_cast<M>((*this)[key]);
    EMBER_CHECK_T(TypeError, m != nullptr, "ModuleDict: module \"", key, "\" is not of the requested type");
    return m;
  }
  size_t size() const { return items_.size(); }
  std::vector<std::string> keys() const;
  std::vector<std::shared_ptr<Module>> values() const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& items() const { return items_; }

  void reset() override {}
  std::shared_ptr<Module> clone(std::optional<Device> device = std::nullopt) const override;
  void pretty_print(std::ostream& os) const override { detail::print_children(os, *this); }

 private:
  void reregister();
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> items_;
};
/// LibTorch's module holder of ModuleDictImpl (nn/module_holder.h).
EMBER_MODULE(ModuleDict);

}  // namespace ember::nn
