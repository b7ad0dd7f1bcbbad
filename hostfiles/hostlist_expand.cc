// Slurm-style host list expansion.
//
// How it works: the text is split at the commas that lie outside brackets into items
// ("node[01-04,07]", "gpu[1-2]"). Each item is parsed into segments, each either literal text
// or a bracket group, and a group is a list of ranges ("01-04", "07"). An item gives as many
// names as the product of its groups' sizes; that count, and the characters the names will
// take, are checked against the limits before any name is built. The names are then produced
// like an odometer: the last group turns fastest, so "r[1-2]n[1-2]" gives r1n1 r1n2 r2n1 r2n2.
// A range's numbers are zero-padded to the width of its first number when that starts with 0
// ("[08-10]" gives 08 09 10).

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <utility>

#include "hostfiles/host_list.h"
#include "hostfiles/parse_util.h"

namespace ddl::hostfiles {

namespace detail {

namespace {

/// Range numbers are at most this many digits, so that they fit in 64 bits with room to spare.
constexpr size_t kMaxRangeDigits = 18;

struct Range {
  uint64_t first = 0;
  uint64_t last = 0;
  size_t width = 0;  ///< zero-pad to this many digits (0: no padding)
};

/// Literal text when `ranges` is empty, else a bracket group.
struct Segment {
  std::string_view literal;
  std::vector<Range> ranges;
};

/// Decimal digits of `value`, ignoring padding.
size_t digits_of(uint64_t value) {
  size_t n = 1;
  while (value >= 10) {
    value /= 10;
    ++n;
  }
  return n;
}

void append_number(std::string& out, uint64_t value, size_t width) {
  char buffer[24];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  const size_t n = static_cast<size_t>(result.ptr - buffer);
  if (width > n) out.append(width - n, '0');
  out.append(buffer, n);
}

/// Parses "01-04" (or "7") found at `at` in `item`, which is written at `offset` right of
/// `base`.
Range parse_range(std::string_view item, size_t at, size_t size, const Position& base,
                  size_t offset) {
  const std::string_view text = item.substr(at, size);
  const size_t dash = text.find('-');
  const std::string_view first = dash == std::string_view::npos ? text : text.substr(0, dash);
  const std::string_view last = dash == std::string_view::npos ? text : text.substr(dash + 1);
  if (!all_digits(first) || !all_digits(last)) {
    fail(base, offset + at,
         "invalid range '" + std::string(text) + "' in '" + std::string(item) +
             "': write numbers such as '1-4' or '7'",
         text.size());
  }
  for (std::string_view number : {first, last}) {
    if (number.size() > kMaxRangeDigits) {
      fail(base, offset + at,
           "range number '" + std::string(number) + "' is too long: use at most " +
               std::to_string(kMaxRangeDigits) + " digits",
           text.size());
    }
  }
  Range range;
  std::from_chars(first.data(), first.data() + first.size(), range.first);
  std::from_chars(last.data(), last.data() + last.size(), range.last);
  if (range.first > range.last) {
    const std::string fixed = std::string(item.substr(0, at)) + std::string(last) + "-" +
                              std::string(first) + std::string(item.substr(at + size));
    fail(base, offset + at,
         "range '" + std::string(text) + "' counts down from " + std::to_string(range.first) +
             " to " + std::to_string(range.last) + ": write '" + fixed + "'",
         text.size());
  }
  if (first.size() > 1 && first.front() == '0') range.width = first.size();
  return range;
}

/// Parses the ranges between '[' and ']'; `at` is where they start in `item`.
std::vector<Range> parse_group(std::string_view item, size_t at, size_t size, const Position& base,
                               size_t offset) {
  if (size == 0) {
    fail(base, offset + at - 1,
         "empty range '[]' in '" + std::string(item) + "': write numbers such as '[1-4]'", 2);
  }
  std::vector<Range> ranges;
  size_t start = at;
  const size_t end = at + size;
  while (start <= end) {
    size_t comma = item.find(',', start);
    if (comma == std::string_view::npos || comma > end) comma = end;
    if (comma == start) {
      fail(base, offset + start,
           "empty range in '" + std::string(item.substr(at - 1, size + 2)) +
               "': remove the extra ','");
    }
    ranges.push_back(parse_range(item, start, comma - start, base, offset));
    start = comma + 1;
  }
  return ranges;
}

/// Splits an item into literal and bracket segments.
std::vector<Segment> parse_item(std::string_view item, const Position& base, size_t offset) {
  std::vector<Segment> segments;
  size_t i = 0;
  while (i < item.size()) {
    if (item[i] == '[') {
      const size_t close = item.find(']', i + 1);
      if (close == std::string_view::npos) {
        fail(base, offset + i,
             "unclosed '[' in '" + std::string(item) + "': add ']' after the range",
             item.size() - i);
      }
      segments.push_back(Segment{{}, parse_group(item, i + 1, close - i - 1, base, offset)});
      i = close + 1;
    } else if (item[i] == ']') {
      fail(base, offset + i,
           "unmatched ']' in '" + std::string(item) + "': remove it or add '[' before the range");
    } else {
      const size_t start = i;
      while (i < item.size() && item[i] != '[' && item[i] != ']') {
        if (!is_host_char(item[i])) bad_host_char(item, i, base, offset);
        ++i;
      }
      segments.push_back(Segment{item.substr(start, i - start), {}});
    }
  }
  return segments;
}

/// How many names the segments give (kMaxNames + 1 when more) and the longest one's length.
std::pair<size_t, size_t> measure(const std::vector<Segment>& segments) {
  size_t count = 1;
  size_t length = 0;
  for (const Segment& s : segments) {
    if (s.ranges.empty()) {
      length += s.literal.size();
      continue;
    }
    size_t group = 0;
    size_t widest = 0;
    for (const Range& r : s.ranges) {
      const uint64_t span = r.last - r.first;  // ranges run upwards, so no wraparound
      group += span >= kMaxNames ? kMaxNames + 1 : static_cast<size_t>(span) + 1;
      if (group > kMaxNames) group = kMaxNames + 1;
      widest = std::max({widest, r.width, digits_of(r.last)});
    }
    count = count > (kMaxNames + 1) / group ? kMaxNames + 1 : count * group;
    length += widest;
  }
  return {count, length};
}

/// Appends every name the segments give to `names`, the last group turning fastest.
void generate(const std::vector<Segment>& segments, std::vector<std::string>& names) {
  struct Wheel {
    const std::vector<Range>* ranges;
    size_t range = 0;
    uint64_t value = 0;
  };
  std::vector<Wheel> wheels;
  for (const Segment& s : segments) {
    if (!s.ranges.empty()) wheels.push_back(Wheel{&s.ranges, 0, s.ranges.front().first});
  }
  for (;;) {
    std::string name;
    size_t w = 0;
    for (const Segment& s : segments) {
      if (s.ranges.empty()) {
        name += s.literal;
      } else {
        const Wheel& wheel = wheels[w++];
        append_number(name, wheel.value, (*wheel.ranges)[wheel.range].width);
      }
    }
    names.push_back(std::move(name));
    // Advance the odometer from its last wheel; stop when the first one rolls over.
    size_t k = wheels.size();
    for (;;) {
      if (k == 0) return;
      Wheel& wheel = wheels[--k];
      const Range& r = (*wheel.ranges)[wheel.range];
      if (wheel.value < r.last) {
        ++wheel.value;
        break;
      }
      if (wheel.range + 1 < wheel.ranges->size()) {
        ++wheel.range;
        wheel.value = (*wheel.ranges)[wheel.range].first;
        break;
      }
      wheel.range = 0;
      wheel.value = wheel.ranges->front().first;
    }
  }
}

/// One comma-separated part of a host list: its text, where it starts, and its segments.
struct Item {
  std::string_view text;
  size_t offset;
  std::vector<Segment> segments;
};

/// Splits `text` at the commas outside brackets; an unclosed '[' runs to the end.
std::vector<Item> split_items(std::string_view text) {
  std::vector<Item> items;
  bool inside = false;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && text[i] == '[') inside = true;
    if (i < text.size() && text[i] == ']') inside = false;
    if (i == text.size() || (text[i] == ',' && !inside)) {
      items.push_back(Item{text.substr(start, i - start), start, {}});
      start = i + 1;
    }
  }
  return items;
}

/// How many names the items parsed so far give, and the characters they take together.
struct Totals {
  size_t names = 0;
  size_t bytes = 0;
};

/// Parses `item` (written at `offset` right of `base`) into its segments and adds what it
/// gives to `totals`. Throws for an empty item, one starting with '-', a name longer than
/// kMaxHostNameLength, and totals beyond kMaxNames or kMaxNameBytes.
void parse_and_measure(Item& item, const Position& base, size_t offset, Totals& totals) {
  if (item.text.empty()) fail(base, offset, "empty host name: remove the extra ','");
  item.segments = parse_item(item.text, base, offset);
  if (item.text.front() == '-') {
    fail(base, offset,
         "host name '" + std::string(item.text) +
             "' starts with '-': check for an option given where a host was expected",
         item.text.size());
  }
  const auto [count, length] = measure(item.segments);
  if (length > kMaxHostNameLength) {
    fail(base, offset,
         "host name is longer than " + std::to_string(kMaxHostNameLength) +
             " characters: use a shorter name or the address",
         item.text.size());
  }
  totals.names += count;
  totals.bytes += count * length;
  if (totals.names > kMaxNames) {
    fail(base, offset,
         "'" + std::string(item.text) + "' makes the host list longer than " +
             std::to_string(kMaxNames) + " names: check the ranges",
         item.text.size());
  }
  if (totals.bytes > kMaxNameBytes) {
    fail(base, offset,
         "'" + std::string(item.text) + "' makes the host list longer than " +
             std::to_string(kMaxNameBytes >> 20) + " MiB: check the ranges",
         item.text.size());
  }
}

}  // namespace

std::vector<std::string> expand_names(std::string_view text, const Position& base, size_t offset) {
  if (trim(text).empty()) fail(base, offset, "empty host list: name at least one host");
  std::vector<Item> items = split_items(text);
  Totals totals;
  for (Item& item : items)
    parse_and_measure(item, base, offset + item.offset, totals);
  std::vector<std::string> names;
  names.reserve(totals.names);
  for (const Item& item : items) {
    generate(item.segments, names);
  }
  return names;
}

}  // namespace detail

std::vector<std::string> expand_hostlist(std::string_view text, const Position& where) {
  return detail::expand_names(text, where, 0);
}

}  // namespace ddl::hostfiles
