// CpuSet: the PUs a rank is bound to, kept as sorted, disjoint, non-adjacent ranges.

#include <algorithm>
#include <cstdint>
#include <utility>

#include "comm/topology.h"
#include "comm/topology/internal.h"

namespace ddl::comm {

using topology::parse_int;
using topology::quote;
using topology::trim;

namespace {

// The largest PU index a CPU set may hold; far above any machine, low enough that a set's size
// and its list of PUs stay small.
constexpr int kMaxPu = (1 << 20) - 1;

std::string pu_range_problem(int first, int last) {
  if (first < 0 || last < 0) return "PU indices cannot be negative";
  if (last > kMaxPu) return "PU " + std::to_string(last) + " is above " + std::to_string(kMaxPu);
  if (first > last)
    return "range " + std::to_string(first) + "-" + std::to_string(last) + " runs backwards";
  return {};
}

// "0-27,88-115" into `ranges`; false with `why` set on a malformed text.
bool parse_cpu_ranges(std::string_view text, std::vector<CpuSet::Range>& ranges, std::string& why) {
  ranges.clear();
  if (trim(text).empty()) return true;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string_view item =
        trim(text.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (item.empty()) {
      why = "an entry is empty";
      return false;
    }
    const size_t dash = item.find('-');
    const std::string_view first_text = trim(item.substr(0, dash));
    const std::string_view last_text =
        dash == std::string_view::npos ? first_text : trim(item.substr(dash + 1));
    CpuSet::Range range;
    for (const auto& [number, value] :
         {std::pair{first_text, &range.first}, {last_text, &range.last}}) {
      if (number.empty() && dash == 0) {
        why = "entry " + quote(item) + " starts with '-': PU indices cannot be negative";
        return false;
      }
      if (!parse_int(number, *value)) {
        why = quote(number) + " is not a PU index";
        return false;
      }
      if (*value < 0) {
        why = "entry " + quote(item) + ": PU indices cannot be negative";
        return false;
      }
    }
    why = pu_range_problem(range.first, range.last);
    if (!why.empty()) return false;
    ranges.push_back(range);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return true;
}

// Sorts and merges overlapping or adjacent ranges.
void normalize(std::vector<CpuSet::Range>& ranges) {
  const bool sorted_disjoint =
      std::adjacent_find(ranges.begin(), ranges.end(), [](const auto& a, const auto& b) {
        return static_cast<int64_t>(a.last) + 1 >= b.first;
      }) == ranges.end();
  if (sorted_disjoint) return;
  std::sort(ranges.begin(), ranges.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  size_t out = 0;
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (static_cast<int64_t>(ranges[out].last) + 1 >= ranges[i].first) {
      ranges[out].last = std::max(ranges[out].last, ranges[i].last);
    } else {
      ranges[++out] = ranges[i];
    }
  }
  ranges.resize(out + 1);
}

}  // namespace

CpuSet CpuSet::of(const std::vector<int>& pus) {
  CpuSet set;
  for (int pu : pus) {
    const std::string problem = pu_range_problem(pu, pu);
    if (!problem.empty()) throw TopologyError("invalid CPU set: " + problem);
    set.ranges_.push_back({pu, pu});
  }
  normalize(set.ranges_);
  return set;
}

CpuSet CpuSet::parse(std::string_view text) {
  CpuSet set;
  std::string why;
  if (!parse_cpu_ranges(text, set.ranges_, why)) {
    throw TopologyError("invalid CPU set " + quote(text) + ": " + why);
  }
  normalize(set.ranges_);
  return set;
}

void CpuSet::add(int first, int last) {
  const std::string problem = pu_range_problem(first, last);
  if (!problem.empty()) throw TopologyError("invalid CPU set: " + problem);
  // Adding in ascending order (how sets are built, PU by PU) extends or follows the last
  // range without sorting: a plan of a million ranks adds tens of millions of PUs.
  if (!ranges_.empty() && first >= ranges_.back().first) {
    Range& back = ranges_.back();
    if (static_cast<int64_t>(back.last) + 1 >= first) {
      back.last = std::max(back.last, last);
    } else {
      ranges_.push_back({first, last});
    }
    return;
  }
  ranges_.push_back({first, last});
  normalize(ranges_);
}

int CpuSet::size() const {
  int count = 0;
  for (const Range& r : ranges_)
    count += r.last - r.first + 1;
  return count;
}

bool CpuSet::contains(int pu) const {
  const auto it = std::upper_bound(ranges_.begin(), ranges_.end(), pu,
                                   [](int value, const Range& r) { return value < r.first; });
  return it != ranges_.begin() && std::prev(it)->last >= pu;
}

std::optional<int> CpuSet::first_shared(const CpuSet& other) const {
  size_t i = 0, j = 0;
  while (i < ranges_.size() && j < other.ranges_.size()) {
    const Range& a = ranges_[i];
    const Range& b = other.ranges_[j];
    const int low = std::max(a.first, b.first);
    if (low <= std::min(a.last, b.last)) return low;
    if (a.last < b.last) {
      ++i;
    } else {
      ++j;
    }
  }
  return std::nullopt;
}

std::vector<int> CpuSet::pus() const {
  std::vector<int> out;
  out.reserve(static_cast<size_t>(size()));
  for (const Range& r : ranges_) {
    for (int pu = r.first; pu <= r.last; ++pu)
      out.push_back(pu);
  }
  return out;
}

std::string CpuSet::str() const {
  std::string out;
  for (const Range& r : ranges_) {
    if (!out.empty()) out += ',';
    out += std::to_string(r.first);
    if (r.last != r.first) out += "-" + std::to_string(r.last);
  }
  return out;
}

}  // namespace ddl::comm
