#pragma once
// What the nodes of a per-node job compare before they start: a digest of each part of the plan,
// so that a node whose plan differs is told which part.

#include <string>

namespace ddl::ddlrun {

struct JobPlan;

/// The parts of `plan` the nodes must agree on, each hashed (FNV-1a, 16 hex digits), as
/// "version=H job_id=H mode=H hosts=H ranks=H ring_orders=H links=H program=H" (the blocks of
/// its topology file, and the program; -x values may differ: each node exports its own).
std::string plan_digest(const JobPlan& plan);

/// The parts in which two plan_digest()s differ, for a message: "ranks and program"; "" when
/// they are equal, "everything" when either is not a plan_digest().
std::string digest_difference(const std::string& a, const std::string& b);

}  // namespace ddl::ddlrun
