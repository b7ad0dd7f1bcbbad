#pragma once
// Which variable tells a process its rank, launcher by launcher: one table, read by libddl
// (identity_from_environment()), by `ddlrun --rank-exec` (launcher/rank_exec.cc) and by the
// Python package (ddl._ddl.launcher_variables(), python/ddl/torch.py).

#include <span>
#include <string_view>
#include <vector>

namespace ddl::comm {

/// One launcher's rank variable: a row of the table.
struct RankVariable {
  std::string_view rank;      ///< "OMPI_COMM_WORLD_RANK"
  std::string_view size;      ///< "OMPI_COMM_WORLD_SIZE"; "" where no reader needs one
  std::string_view launcher;  ///< who sets it: "Open MPI's mpirun"
  /// Where libddl's identity_from_environment() asks it (1 first); 0: not there (libddl asks a
  /// PMIx server itself).
  int identity = 0;
  /// Where `ddlrun --rank-exec` asks it (1 first); 0: not there.
  int rank_exec = 0;
};

/// Every row.
std::span<const RankVariable> rank_variables();

/// The rows `reader` (&RankVariable::identity or &RankVariable::rank_exec) asks, in its order.
std::vector<const RankVariable*> rank_variables_of(int RankVariable::*reader);

/// Set for every process a PMIx server serves (libddl then bootstraps through it).
inline constexpr std::string_view kPmixNamespaceVariable = "PMIX_NAMESPACE";

}  // namespace ddl::comm
