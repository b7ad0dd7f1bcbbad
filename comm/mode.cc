#include "comm/mode.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <sstream>

#include "base/text.h"

namespace ddl::comm {

namespace {

constexpr std::string_view kLetters = "rbnmcp";
constexpr size_t kMaxDims = 8;

std::string_view trim(std::string_view s) {
  return base::trim(s, " \t\n");
}

[[noreturn]] void fail(std::string_view text, const std::string& what) {
  throw ModeError("invalid mode '" + std::string(text) + "': " + what);
}

std::string join_dims(const std::vector<int>& dims, std::string_view sep) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += sep;
    s += std::to_string(dims[i]);
  }
  return s;
}

}  // namespace

int64_t Mode::ranks() const {
  if (dims.empty()) return 0;
  int64_t product = 1;
  for (int d : dims)
    product *= d;
  return product;
}

std::string Mode::str() const {
  std::string s(1, static_cast<char>(algorithm));
  if (!dims.empty()) s += ":" + join_dims(dims, "x");
  return s;
}

Mode Mode::resolved(int ranks) const {
  if (!dims.empty()) return *this;
  return Mode{algorithm, {ranks}};
}

Mode parse_mode(std::string_view raw) {
  const std::string_view text = trim(raw);
  if (text.empty()) fail(raw, "it is empty; use a letter (r, b, n, m, c or p), e.g. 'p:6x2x1x1'");
  const char letter = text[0];
  if (kLetters.find(letter) == std::string_view::npos) {
    fail(text, "unknown algorithm '" + std::string(1, letter) +
                   "'; use one of r (ring), b (enhanced NCCL), n (NCCL), m (MPI), c (RCS), "
                   "p (pick the best)");
  }
  Mode mode{static_cast<Algorithm>(letter), {}};
  if (text.size() == 1) return mode;
  if (text[1] != ':') {
    fail(text, "expected ':' after the letter, as in '" + std::string(1, letter) + ":4x2'");
  }
  std::string_view rest = text.substr(2);
  if (rest.empty()) fail(text, "no dimensions after ':'; write them as '4x2', innermost first");
  int64_t product = 1;
  size_t index = 0;
  while (true) {
    ++index;
    const size_t x = rest.find('x');
    const std::string_view field = rest.substr(0, x);
    if (field.empty()) fail(text, "dimension " + std::to_string(index) + " is empty");
    int value = 0;
    const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
    if (ec == std::errc::result_out_of_range) {
      fail(text,
           "dimension " + std::to_string(index) + " '" + std::string(field) + "' is too large");
    }
    if (ec != std::errc() || end != field.data() + field.size() || value < 0) {
      fail(text,
           "dimension " + std::to_string(index) + " '" + std::string(field) + "' is not a number");
    }
    if (value == 0) {
      fail(text, "dimension " + std::to_string(index) + " is 0; each dimension must be at least 1");
    }
    mode.dims.push_back(value);
    if (mode.dims.size() > kMaxDims) {
      fail(text, "more than " + std::to_string(kMaxDims) + " dimensions");
    }
    product *= value;
    if (product > std::numeric_limits<int32_t>::max()) {
      fail(text, "the dimensions multiply to more than 2147483647 ranks");
    }
    if (x == std::string_view::npos) break;
    rest = rest.substr(x + 1);
  }
  return mode;
}

void check_mode_fits(const Mode& mode, int ranks, std::string_view job_detail) {
  if (mode.dims.empty() || mode.ranks() == ranks) return;
  std::ostringstream msg;
  msg << "mode '" << mode.str() << "' describes " << mode.ranks() << " ranks";
  if (mode.dims.size() > 1) msg << " (" << join_dims(mode.dims, " x ") << ")";
  msg << ", but the job has " << ranks;
  if (!job_detail.empty()) msg << " (" << job_detail << ")";
  msg << "; make the dimensions multiply to " << ranks << " or change the number of ranks";
  throw ModeError(msg.str());
}

Mode mode_from_ddl_options(std::string_view options) {
  std::istringstream in{std::string(options)};
  std::string word;
  while (in >> word) {
    if (word == "-mode" || word == "--mode") {
      std::string value;
      if (!(in >> value)) throw ModeError("DDL_OPTIONS: '-mode' needs a value, e.g. -mode p:6x2");
      return parse_mode(value);
    }
  }
  return Mode{};
}

size_t pipeline_chunk_bytes(size_t pipeline_bytes, std::span<const int> sizes) {
  int longest = 1;
  for (int d : sizes)
    longest = std::max(longest, d);
  constexpr size_t kBaseSteps = 4;  // a ring of 3: 2 reduce-scatter and 2 allgather steps
  const size_t steps = 2 * (static_cast<size_t>(longest) - 1);
  if (pipeline_bytes == 0 || steps <= kBaseSteps) return pipeline_bytes;
  const size_t per_step = std::max<size_t>(1, pipeline_bytes / kBaseSteps);
  if (per_step > std::numeric_limits<size_t>::max() / steps) {
    return std::numeric_limits<size_t>::max();
  }
  return std::max(pipeline_bytes, per_step * steps);
}

namespace {

/// The factors of `n` (all its prime factors at most `limit`) into exactly `k` factors of at
/// most `limit`, in non-increasing order, with the least sum; empty when there are none.
/// Depth-first over the divisors, largest factor first: `n` has few divisors (4,608: 30).
std::vector<int> even_factors(int n, int k, int limit) {
  if (k == 1) return n <= limit ? std::vector<int>{n} : std::vector<int>{};
  std::vector<int> best;
  int best_sum = std::numeric_limits<int>::max();
  for (int d = std::min(n, limit); d >= 2; --d) {
    if (n % d != 0) continue;
    // The largest of k factors is at least the k-th root of n.
    if (std::pow(static_cast<double>(d), k) < static_cast<double>(n) - 0.5) break;
    std::vector<int> rest = even_factors(n / d, k - 1, d);
    if (rest.empty()) continue;
    int sum = d;
    for (int f : rest)
      sum += f;
    if (sum < best_sum) {
      best_sum = sum;
      best = {d};
      best.insert(best.end(), rest.begin(), rest.end());
    }
  }
  return best;
}

}  // namespace

std::vector<int> ring_factors(int size, int max_ring) {
  if (max_ring < 2 || size <= max_ring) return {size};
  // Prime factors above max_ring stand alone; the product of the others is split evenly.
  std::vector<int> out;
  int small = 1, rest = size;
  for (int p = 2; static_cast<int64_t>(p) * p <= rest; ++p) {
    for (; rest % p == 0; rest /= p) {
      if (p > max_ring) {
        out.push_back(p);
      } else {
        small *= p;
      }
    }
  }
  if (rest > max_ring) {
    out.push_back(rest);
  } else {
    small *= rest;
  }
  std::vector<int> even;
  for (int k = 1; small > 1 && even.empty(); ++k)
    even = even_factors(small, k, max_ring);
  out.insert(out.end(), even.begin(), even.end());
  std::sort(out.begin(), out.end(), std::greater<>());
  return out;
}

size_t pipeline_chunk_elems(size_t count, size_t elem_size, size_t chunk_bytes) {
  if (chunk_bytes == 0 || count == 0) return std::max<size_t>(count, 1);
  return std::max({size_t{1}, chunk_bytes / std::max<size_t>(elem_size, 1),
                   (count + kMaxPipelineChunks - 1) / kMaxPipelineChunks});
}

}  // namespace ddl::comm
