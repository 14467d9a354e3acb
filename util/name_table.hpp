// A type's words written once, as a table of (value, word) rows (an enum's names, a unit's scale,
// an operator's column): the word of a value and the value of a word both read the same rows, so
// the two directions cannot disagree.
#pragma once
#include <cstddef>
#include <string_view>
#include <utility>

namespace lcm {

/// One value (an enum value, a number) and the word it is written as.
template <class E>
using NameRow = std::pair<E, const char*>;

/// The word of `value` in `table` (the first row holding it), or `fallback` when no row does.
template <class E, size_t N>
constexpr const char* name_of(const NameRow<E> (&table)[N], E value, const char* fallback) {
  for (const NameRow<E>& row : table)
    if (row.first == value) return row.second;
  return fallback;
}

/// The value written `word` in `table` (the first row with it): true with `*out` set, or false
/// (and `*out` unchanged) when no row has that word.
template <class E, size_t N>
constexpr bool value_of(const NameRow<E> (&table)[N], std::string_view word, E* out) {
  for (const NameRow<E>& row : table)
    if (word == row.second) {
      *out = row.first;
      return true;
    }
  return false;
}

}  // namespace lcm
