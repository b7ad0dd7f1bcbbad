// The table of rank variables (see rank_variables.h). libddl and `ddlrun --rank-exec` ask the
// rows in orders of their own: libddl never reads PMIX_RANK (it asks the PMIx server), and
// under prterun `ddlrun --rank-exec` must take PMIX_RANK before a SLURM_PROCID inherited from
// an allocation.

#include "comm/bootstrap/rank_variables.h"

#include <algorithm>

namespace ddl::comm {

namespace {

constexpr RankVariable kRankVariables[] = {
    {"DDL_RANK", "DDL_SIZE", "ddlrun", 1, 1},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI's mpirun", 2, 2},
    {"PMIX_RANK", "", "a PMIx launcher (prterun, flux run -o pmi=pmix)", 0, 3},
    {"JSM_NAMESPACE_RANK", "JSM_NAMESPACE_SIZE", "LSF's jsrun", 3, 5},
    {"SLURM_PROCID", "SLURM_NTASKS", "Slurm's srun", 4, 4},
    {"PMI_RANK", "PMI_SIZE", "a PMI launcher", 5, 0},
};

}  // namespace

std::span<const RankVariable> rank_variables() {
  return kRankVariables;
}

std::vector<const RankVariable*> rank_variables_of(int RankVariable::*reader) {
  std::vector<const RankVariable*> rows;
  for (const RankVariable& v : kRankVariables)
    if (v.*reader > 0) rows.push_back(&v);
  std::sort(rows.begin(), rows.end(), [&](auto* a, auto* b) { return a->*reader < b->*reader; });
  return rows;
}

}  // namespace ddl::comm
