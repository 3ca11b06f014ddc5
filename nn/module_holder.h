// ModuleHolder<Impl> and EMBER_MODULE(Name): LibTorch's module holder (TORCH_MODULE). A holder
// is a shared_ptr<NameImpl> with value syntax: `Name m(args...)` builds a NameImpl, `m(x)`
// calls forward, `m->weight` and `*m` reach the module, copies share it. Thread-safety is the
// module's (not thread-safe).
#pragma once
#include <concepts>
#include <cstddef>
#include <memory>
#include <ostream>
#include <utility>

#include "nn/module.h"

namespace ember::nn {

template <class Impl>
class ModuleHolder {
 public:
  using ContainedType = Impl;

  /// Builds Impl from the arguments; with none, Impl's default constructor.
  template <class... Args>
    requires std::constructible_from<Impl, Args...>
  explicit ModuleHolder(Args&&... args) : impl_(std::make_shared<Impl>(std::forward<Args>(args)...)) {}
  /// An empty holder (to be assigned later), as LibTorch's `Name m{nullptr}`.
  ModuleHolder(std::nullptr_t) {}  // NOLINT
  ModuleHolder(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}  // NOLINT

  /// Calls forward(args...). Throws Error when the holder is empty.
  template <class... Args>
  decltype(auto) operator()(Args&&... args) {
    return checked()->forward(std::forward<Args>(args)...);
  }
  Impl* operator->() const { return checked(); }
  Impl& operator*() const { return *checked(); }
  Impl* get() const { return impl_.get(); }
  const std::shared_ptr<Impl>& ptr() const { return impl_; }
  operator std::shared_ptr<Impl>() const { return impl_; }  // NOLINT: usable where a shared_ptr is
  bool is_empty() const { return impl_ == nullptr; }
  explicit operator bool() const { return impl_ != nullptr; }

 private:
  Impl* checked() const {
    EMBER_CHECK(impl_ != nullptr, "ModuleHolder: accessing an empty holder (constructed from nullptr)");
    return impl_.get();
  }
  std::shared_ptr<Impl> impl_;
};

template <class Impl>
std::ostream& operator<<(std::ostream& os, const ModuleHolder<Impl>& m) {
  return os << *m;
}

}  // namespace ember::nn

/// Declares `Name`, a ModuleHolder of `NameImpl` (define NameImpl first), as TORCH_MODULE does:
///   struct NetImpl : ember::nn::Cloneable<NetImpl> { ... Tensor forward(const Tensor&); };
///   EMBER_MODULE(Net);
///   Net net(args...);  Tensor y = net(x);  net->parameters();  std::cout << *net;
#define EMBER_MODULE(Name)                                          \
  class Name : public ::ember::nn::ModuleHolder<Name##Impl> {       \
   public:                                                          \
    using ::ember::nn::ModuleHolder<Name##Impl>::ModuleHolder;      \
  }
