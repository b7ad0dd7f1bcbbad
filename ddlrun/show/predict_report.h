#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "ddlrun/plan/plan.h"
#include "ddlrun/show/report.h"

namespace ddl::ddlrun {

/// The dry run's prediction in text: the fabric's levels, each mode's predicted time and busbw
/// at 1, 16 and 256 MiB (the plan's mode starred), and which mode was picked and why. Nothing
/// for a job of one rank.
void prediction_text(std::ostream& out, const JobPlan& plan);

/// Why the plan runs its mode, and what the model prefers: {"picked", "p:2x2x2x1, the fastest
/// predicted for 64 MiB (--predict-bytes): 2.294 s"} with --mode auto, else {"named", ...}.
/// The plan must hold a prediction.
std::pair<std::string, std::string> prediction_verdict(const JobPlan& plan);

/// The chosen mode's predicted time and busbw at each size, one legend line per size
/// ({"predicted 16 MiB", "190 ms, 132.1 MB/s busbw"}), then the verdict; nothing for one rank.
std::vector<std::pair<std::string, std::string>> prediction_legend(const JobPlan& plan);

/// The same as a document (the `prediction` key of YAML and JSON plans); null for one rank.
Value prediction_document(const JobPlan& plan);

}  // namespace ddl::ddlrun
