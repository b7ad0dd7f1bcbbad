#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ddlrun/show/picture_layout.h"

namespace ddl::ddlrun::picture {

/// What the picture's legend lists below its heading, one "key: value" line each, in order.
/// plan_legend() (plan_picture.h) gives the mode, ranks, hosts and launcher; whoever knows more
/// about the plan (predicted allreduce times) appends lines before drawing.
struct Legend {
  std::vector<std::pair<std::string, std::string>> lines;
};

/// The picture of `model` as an SVG document: the legend (`heading`, then `legend`'s lines and a
/// key of each ring dimension's colour), then the hosts in detail (every rank a box titled
/// "rank N", every ring edge a path), or with more than kMaxDetailedHosts hosts one box per rack
/// and one path per dimension and pair of racks that rings join.
std::string model_svg(const Model& model, const std::string& heading, const Legend& legend);

}  // namespace ddl::ddlrun::picture
