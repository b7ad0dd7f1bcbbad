#pragma once

#include <string>
#include <vector>

#include "comm/comm.h"
#include "ddlrun/show/svg_writer.h"

namespace ddl::ddlrun::picture {

using svg::Box;

/// One rank as the picture shows it.
struct RankInfo {
  int rank = 0;
  int host = 0;  ///< index into Model::hosts
  int local_rank = 0;
  int gpu = -1;        ///< -1: none
  std::string cpus;    ///< "0-27", empty when not bound
  std::string nic;     ///< empty when none
  std::string detail;  ///< everything known about it, for its tooltip
};

/// A package (socket) of a host with the rank bound to each of its cores, its GPUs, its NICs and
/// the ranks drawn in it; os_index -1 is the column of ranks that belong to no known package.
struct PackageInfo {
  int os_index = -1;
  std::vector<int> core_owner;  ///< per core in logical order: the global rank bound to it, or -1
  std::vector<int> gpus;        ///< indexes of the GPUs attached to it, used by a rank or not
  std::vector<std::string> nics;
  std::vector<int> ranks;  ///< global ranks, in the order they are drawn
};

struct HostInfo {
  std::string name;
  std::vector<PackageInfo> packages;
};

/// What the picture shows, taken from the plan (plan_picture.cc) so that the layout needs no
/// JobPlan: hosts with their packages, racks of hosts, ranks, and the rings of every dimension.
struct Model {
  std::vector<HostInfo> hosts;
  std::vector<std::vector<int>> racks;         ///< host indices, each rack in host order
  std::vector<RankInfo> ranks;                 ///< by global rank
  std::vector<std::vector<comm::Ring>> rings;  ///< rings[d]: the rings of dimension d
};

struct PackageLayout {
  Box box;
  Box cores;  ///< the strip of core cells; empty (h 0) without cores
  std::vector<Box> nics;
};

struct HostLayout {
  Box box;
  std::vector<PackageLayout> packages;
};

/// Where everything goes. In the detailed form `hosts` and `ranks` are filled; in the summary
/// form (layout_racks) only `racks`.
struct Layout {
  Box page;
  Box legend;
  std::vector<Box> racks;
  std::vector<HostLayout> hosts;  ///< by host index
  std::vector<Box> ranks;         ///< by global rank
};

/// Plans with more hosts than this are drawn one box per rack.
inline constexpr int kMaxDetailedHosts = 36;

/// The detailed layout: racks stacked, each a grid of hosts, each host its packages side by
/// side, each package its core strip, NICs and ranks. `legend` is the legend's size (its x and y
/// are ignored); the legend goes at the top.
Layout layout_hosts(const Model& model, const Box& legend);

/// The summary layout: one box per rack in a grid, the legend on top.
Layout layout_racks(const Model& model, const Box& legend);

/// Where one ring edge runs: from the box of its sender to that of its receiver, each inside its
/// container (its host, or in the summary the rack box itself).
struct EdgeEnds {
  Box from;
  Box to;
  Box from_container;
  Box to_container;
  int dim = 0;
  bool forward = true;  ///< the receiver's container comes after the sender's (or is the same)
  int lane = 0;         ///< which of the dimension's rings: edges between hosts run deeper by lane
};

/// The SVG path data of one ring edge; the arrow marker goes at its end.
std::string edge_path(const EdgeEnds& edge);

}  // namespace ddl::ddlrun::picture
