#pragma once

#include <cstdint>
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

}  // namespace ddl::comm
