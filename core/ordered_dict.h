// OrderedDict<Key, Value>: LibTorch's torch::OrderedDict, what Module::named_parameters() and
// named_buffers() return. A vector of items in insertion order; each item is a
// std::pair<Key, Value> (so `auto& [name, tensor]` and .first/.second work) that also has
// LibTorch's key() / value(). Lookup by key is a linear scan, as the dicts it holds are a model's
// parameters. Converts to std::vector<std::pair<Key, Value>> (nn::StateDict) where one is
// expected. Not thread-safe.
#pragma once
#include <cstddef>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace ember {

template <class Key, class Value>
class OrderedDictItem : public std::pair<Key, Value> {
 public:
  using std::pair<Key, Value>::pair;
  OrderedDictItem(std::pair<Key, Value> p) : std::pair<Key, Value>(std::move(p)) {}  // NOLINT: implicit
  const Key& key() const noexcept { return this->first; }
  Value& value() noexcept { return this->second; }
  const Value& value() const noexcept { return this->second; }
  const std::pair<Key, Value>& pair() const noexcept { return *this; }
};

template <class Key, class Value>
class OrderedDict : public std::vector<OrderedDictItem<Key, Value>> {
 public:
  using Item = OrderedDictItem<Key, Value>;
  using Base = std::vector<Item>;
  using Base::Base;
  using Base::operator[];
  OrderedDict() = default;
  OrderedDict(const std::vector<std::pair<Key, Value>>& items) : Base(items.begin(), items.end()) {}  // NOLINT

  /// The value under `key`; throws IndexError naming the key when there is none.
  Value& operator[](const Key& key) { return at_key(key); }
  const Value& operator[](const Key& key) const { return const_cast<OrderedDict*>(this)->at_key(key); }
  /// A pointer to the value under `key`, or null.
  Value* find(const Key& key) noexcept {
    for (auto& item : *this) {
      if (item.first == key) return &item.second;
    }
    return nullptr;
  }
  const Value* find(const Key& key) const noexcept { return const_cast<OrderedDict*>(this)->find(key); }
  bool contains(const Key& key) const noexcept { return find(key) != nullptr; }
  std::vector<Key> keys() const {
    std::vector<Key> out;
    out.reserve(this->size());
    for (const auto& item : *this) out.push_back(item.first);
    return out;
  }
  std::vector<Value> values() const {
    std::vector<Value> out;
    out.reserve(this->size());
    for (const auto& item : *this) out.push_back(item.second);
    return out;
  }
  /// Appends (key, value); throws ValueError when the key is already there.
  Value& insert(Key key, Value value) {
    EMBER_CHECK_T(ValueError, !contains(key), "OrderedDict::insert: key '", key, "' already present");
    this->emplace_back(std::move(key), std::move(value));
    return this->back().second;
  }
  /// As a plain list of pairs (nn::StateDict), for the functions that take one.
  operator std::vector<std::pair<Key, Value>>() const {  // NOLINT: implicit
    return std::vector<std::pair<Key, Value>>(this->begin(), this->end());
  }

 private:
  Value& at_key(const Key& key) {
    Value* v = find(key);
    EMBER_CHECK_T(IndexError, v != nullptr, "OrderedDict: no key '", key, "' (", this->size(), " keys)");
    return *v;
  }
};

}  // namespace ember
