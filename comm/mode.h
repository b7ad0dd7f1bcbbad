#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ddl::comm {

/// How each ring dimension is reduced (IBM DDL's mode letters).
enum class Algorithm : char {
  kRing = 'r',          ///< DDL's own ring only
  kNcclEnhanced = 'b',  ///< enhanced NCCL where possible, else ring
  kNccl = 'n',          ///< NCCL where possible, else ring
  kMpi = 'm',           ///< MPI reduce-scatter + allgatherv
  kRcs = 'c',           ///< RCS
  kExplore = 'p',       ///< try each and pick the best per dimension (the default)
};

/// A DDL mode string, "<algo>[:<d1>x<d2>x...]", dimensions innermost first. On Summit the four
/// dimensions are GPUs per node x nodes per rack x racks per aisle x aisles: "p:6x18x1x1".
struct Mode {
  Algorithm algorithm = Algorithm::kExplore;
  std::vector<int> dims;  ///< empty: one ring over all ranks

  /// The number of ranks the dimensions describe (their product), or 0 when there are none.
  int64_t ranks() const;
  /// Canonical text, "p:6x18x1x1" or "r".
  std::string str() const;
  /// The same algorithm with a single dimension covering `ranks` when dims is empty.
  Mode resolved(int ranks) const;

  bool operator==(const Mode&) const = default;
};

/// A malformed mode string, or one that does not fit the job. what() names the string, the
/// fault and the fix.
class ModeError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// Parses "r", "p:6x2x1x1", "n:4". Whitespace around the string is ignored. Throws ModeError:
/// unknown letter, missing or empty dimensions, non-numeric or zero dimensions, more than 8
/// dimensions, a product above 2^31-1.
Mode parse_mode(std::string_view text);

/// Throws ModeError when the mode's dimensions describe a different number of ranks than the
/// job has: "mode 'p:6x2x1x1' describes 12 ranks (6 x 2 x 1 x 1), but the job has 8".
/// `job_detail` (e.g. "2 hosts x 4") is added in parentheses after the job's count when given.
void check_mode_fits(const Mode& mode, int ranks, std::string_view job_detail = {});

/// The mode from IBM's DDL_OPTIONS string ("-mode p:6x2x1x1 -dbg_level 1"), or the default
/// mode when it has no -mode. Other options are ignored here.
Mode mode_from_ddl_options(std::string_view options);

/// DDL_PIPELINE_BYTES' default: the chunk of the pipelined multi-dimensional allreduce
/// (comm/collectives/multi_dim.cc) whose longest ring has up to 3 members.
inline constexpr size_t kPipelineBytes = size_t{1} << 20;
/// The most chunks one pipelined allreduce is cut into, however small the chunk.
inline constexpr size_t kMaxPipelineChunks = 4096;

/// The chunk of the pipelined multi-dimensional allreduce over dimensions of `sizes` members
/// (innermost first, 1s allowed), for DDL_PIPELINE_BYTES `pipeline_bytes` (0: not pipelined,
/// and 0 is returned). Every chunk pays each step of its rings a latency, 2(d-1) steps for a
/// ring of d, so the chunk grows with the longest ring: pipeline_bytes / 4 for each of its
/// steps, and never less than pipeline_bytes (rings of up to 3 members: 4 steps).
/// 4,608 hosts in one ring: 9,214 steps, chunks of 2,303.5 x pipeline_bytes. The cost model
/// (mapper/cost.cc) predicts with this rule, libddl runs with it.
size_t pipeline_chunk_bytes(size_t pipeline_bytes, std::span<const int> sizes);

/// DDL_MAX_RING's default: the longest ring the multi-dimensional allreduce runs as one.
inline constexpr int kMaxRing = 16;

/// The sub-rings one dimension of `size` members runs as, innermost first, their sizes
/// multiplying to `size`: {size} when size <= max_ring (or max_ring < 2); otherwise the fewest
/// factors of at most max_ring each, the most even of those (the least sum: fewest steps), a
/// prime factor above max_ring standing as a ring of its own. A ring of d pays 2(d-1) latencies
/// a pass, sub-rings of a x b pay 2(a-1) + 2(b-1) and move the same bytes through each
/// member's link: 4,608 hosts with max_ring 16 run as 9 x 8 x 8 x 8, 58 steps instead of
/// 9,214. ring_factors(18, 16) = {6, 3}; ring_factors(34, 16) = {17, 2}; (17, 16) = {17}.
std::vector<int> ring_factors(int size, int max_ring);

/// The elements of each chunk when an allreduce of `count` elements of `elem_size` bytes goes
/// through in chunks of `chunk_bytes` (0: one chunk of all `count`): at least one, at least
/// chunk_bytes / elem_size, and enough that there are at most kMaxPipelineChunks chunks.
size_t pipeline_chunk_elems(size_t count, size_t elem_size, size_t chunk_bytes);

}  // namespace ddl::comm
