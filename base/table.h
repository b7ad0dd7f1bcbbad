#pragma once
// Fixed lookup tables: an enum's names (or its counterpart in another library) kept as one
// constant array of {key, value} pairs, read through lookup(), instead of a switch per mapping.

#include <cstddef>
#include <optional>
#include <utility>

namespace ddl::base {

/// The value paired with `key` in `table` (the first such pair), or nullopt when the table has
/// none. Linear: the tables are a handful of entries.
template <typename Key, typename Value, std::size_t N>
constexpr std::optional<Value> lookup(const std::pair<Key, Value> (&table)[N], const Key& key) {
  for (const auto& [k, v] : table) {
    if (k == key) return v;
  }
  return std::nullopt;
}

}  // namespace ddl::base
