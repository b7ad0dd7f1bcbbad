#pragma once

#include <string>

#include "ddlrun/plan/plan.h"
#include "ddlrun/show/picture_layout.h"
#include "ddlrun/show/picture_svg.h"

namespace ddl::ddlrun {

/// The legend of `plan`: mode (and why), ranks, hosts (and racks), launcher.
picture::Legend plan_legend(const JobPlan& plan);

/// What the picture of `plan` shows: its used hosts in order, each host's packages with the
/// rank bound to each core, its NICs (those a rank uses, and physical ones), the ranks drawn in
/// the package of their GPU (else of their first CPU; else in a column of their own), the racks
/// (hosts per rack from the mode: the dimension after those inside a host; one rack otherwise),
/// and the rings.
picture::Model picture_model(const JobPlan& plan);

/// The picture of `plan` (`--dry-run --output svg`), headed by its mode.
std::string plan_svg(const JobPlan& plan, const picture::Legend& legend);

}  // namespace ddl::ddlrun
