#pragma once

#include <ostream>

#include "ddlrun/plan.h"
#include "ddlrun/report.h"

namespace ddl::cli {

/// The dry run's prediction in text: the fabric's levels, each mode's predicted time and busbw
/// at 1, 16 and 256 MiB (the plan's mode starred), and which mode was picked and why. Nothing
/// for a job of one rank.
void prediction_text(std::ostream& out, const JobPlan& plan);

/// The same as a document (the `prediction` key of YAML and JSON plans); null for one rank.
Value prediction_document(const JobPlan& plan);

}  // namespace ddl::cli
