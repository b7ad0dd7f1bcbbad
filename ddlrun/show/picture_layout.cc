// How the layout works. Everything is measured first, then placed top-down:
//  - a package column holds, top to bottom: its title, a strip with one cell per core (coloured
//    by the rank bound to it), a row of its NICs, a lane for the arcs of rings inside the host,
//    and its ranks, at most kRanksPerRow to a row. All packages of a host share these offsets,
//    so ranks line up across a host;
//  - a host is its name above its packages side by side, with room below for the arcs that
//    close rings inside it;
//  - a rack is a grid of hosts, kHostColumns wide, every cell the size of the largest host, with
//    gutters between rows and columns where the rings between hosts run; racks are stacked below
//    the legend. In the summary, a rack is one box and racks form the grid.
// Ring edges (edge_path) inside a host arc over the ranks when they go right along a row, curve
// under them going left, and between rows of ranks run through the lane between the rows or, up,
// around the ranks' left side. Edges between hosts of one row curve through the gutter below it;
// edges between rows run straight along the gutters only (below the sender's row, up or down the
// column gutter left of the receiver's host, into its row's gutter) and enter the receiving rank
// from above when its host is in a lower row, else from below. No line crosses a host.
// Dimensions, directions and rings get different depths and offsets so that a->b and b->a, and
// parallel rings, stay apart.
#include "ddlrun/show/picture_layout.h"

#include <algorithm>
#include <cmath>

namespace ddl::ddlrun::picture {

namespace {

/// A width and a height.
struct Extent {
  double w;
  double h;
};

constexpr double kMargin = 16;
constexpr double kGap = 8;
constexpr Extent kRank{96, 56};
constexpr int kRanksPerRow = 6;
constexpr double kTitleH = 16;
constexpr double kCoreH = 12;
constexpr Extent kNic{64, 16};
constexpr double kArcLane = 24;
constexpr double kPackageMinW = 180;  // room for its title with eight GPUs

/// A host's box: the bands above and below its packages, the gaps between hosts, hosts per row.
constexpr struct {
  double header = 22, bottom = 22;
  double gap_x = 48, gap_y = 76;
  int columns = 6;
} kHost{};

/// A rack's box: its title band, the padding right of it (left of it, a column gutter), the gap
/// between racks, and the size of a rack drawn as one box (above kMaxDetailedHosts hosts).
constexpr struct {
  double header = 28, pad = 14, gap = 24;
  Extent box{280, 92};
} kRack{};

/// Edges between hosts: depths (lanes) so that parallel rings stay apart, and parallel tracks in
/// the gutters between rows and columns (10 + tracks * row_gap fits gap_y; 8 + tracks *
/// column_gap fits gap_x).
constexpr struct {
  int lanes = 6, tracks = 24;
  double row_gap = 2.4, column_gap = 1.5;
} kRoute{};

/// The vertical sections every package of one host has.
struct Sections {
  bool cores = false;
  bool nics = false;
};

Sections sections_of(const HostInfo& host) {
  Sections s;
  for (const PackageInfo& p : host.packages) {
    s.cores = s.cores || !p.core_owner.empty();
    s.nics = s.nics || !p.nics.empty();
  }
  return s;
}

void shift(Box& box, double dx, double dy) {
  box.x += dx;
  box.y += dy;
}

/// Lays out one package with its top-left corner at (x, y); appends its ranks' boxes.
PackageLayout layout_package(const PackageInfo& p, const Sections& s, double x, double y,
                             std::vector<std::pair<int, Box>>& ranks) {
  const int count = static_cast<int>(p.ranks.size());
  const int columns = std::min(std::max(count, 1), kRanksPerRow);
  const int rows = (count + kRanksPerRow - 1) / kRanksPerRow;
  const double nics_w = static_cast<double>(p.nics.size()) * (kNic.w + kGap);
  const double w = kGap + std::max({columns * (kRank.w + kGap), nics_w, kPackageMinW});
  PackageLayout out;
  double top = y + kTitleH + kGap;
  if (s.cores) {
    if (!p.core_owner.empty()) out.cores = {x + kGap, top, w - 2 * kGap, kCoreH};
    top += kCoreH + kGap;
  }
  if (s.nics) {
    for (size_t i = 0; i < p.nics.size(); ++i)
      out.nics.push_back(
          {x + kGap + static_cast<double>(i) * (kNic.w + kGap), top, kNic.w, kNic.h});
    top += kNic.h + kGap;
  }
  top += kArcLane;
  for (int i = 0; i < count; ++i) {
    const Box box{x + kGap + (i % kRanksPerRow) * (kRank.w + kGap),
                  top + (i / kRanksPerRow) * (kRank.h + kArcLane), kRank.w, kRank.h};
    ranks.emplace_back(p.ranks[static_cast<size_t>(i)], box);
  }
  out.box = {x, y, w, top + std::max(rows, 1) * (kRank.h + kArcLane) - kArcLane + kGap - y};
  return out;
}

/// Lays out one host at the origin; appends its ranks' boxes.
HostLayout layout_host(const HostInfo& host, std::vector<std::pair<int, Box>>& ranks) {
  const Sections s = sections_of(host);
  HostLayout out;
  double x = kGap, height = 0;
  for (const PackageInfo& p : host.packages) {
    out.packages.push_back(layout_package(p, s, x, kHost.header, ranks));
    x = out.packages.back().box.right() + kGap;
    height = std::max(height, out.packages.back().box.h);
  }
  for (PackageLayout& p : out.packages)
    p.box.h = height;  // equal columns read better
  out.box = {0, 0, std::max(x, kPackageMinW), kHost.header + height + kHost.bottom};
  return out;
}

void shift(HostLayout& host, double dx, double dy) {
  shift(host.box, dx, dy);
  for (PackageLayout& p : host.packages) {
    shift(p.box, dx, dy);
    shift(p.cores, dx, dy);
    for (Box& n : p.nics)
      shift(n, dx, dy);
  }
}

/// Cells of `cell` size from (x, y), kHost.columns to a row, each row followed by a gutter;
/// returns the box they fill, gutters included.
Box place_grid(size_t count, const Box& cell, double x, double y, std::vector<Box>& cells) {
  const size_t columns = std::min<size_t>(std::max<size_t>(count, 1), kHost.columns);
  const size_t rows = std::max<size_t>((count + columns - 1) / columns, 1);
  for (size_t i = 0; i < count; ++i) {
    cells.push_back({x + static_cast<double>(i % columns) * (cell.w + kHost.gap_x),
                     y + static_cast<double>(i / columns) * (cell.h + kHost.gap_y), cell.w,
                     cell.h});
  }
  return {x, y, static_cast<double>(columns) * (cell.w + kHost.gap_x) - kHost.gap_x,
          static_cast<double>(rows) * (cell.h + kHost.gap_y)};
}

/// The page around the legend and the racks.
Box page_around(const Layout& layout) {
  double w = layout.legend.right(), h = layout.legend.bottom();
  for (const Box& r : layout.racks) {
    w = std::max(w, r.right());
    h = std::max(h, r.bottom());
  }
  return {0, 0, w + kMargin, h + kMargin};
}

std::string point(double x, double y) {
  return svg::coordinate(x) + "," + svg::coordinate(y);
}

/// The track an edge between containers runs on in the gutters: one per dimension, ring (modulo
/// kRoute.lanes) and direction.
int track(const EdgeEnds& e) {
  return (e.dim * 2 * kRoute.lanes + (e.lane % kRoute.lanes) * 2 + (e.forward ? 0 : 1)) %
         kRoute.tracks;
}

/// Inside one container: an arc over the ranks going right along a row, a curve under them
/// going left, an S through the lane between rows going down a row, and going up a loop around
/// the ranks' left side.
std::string inside_path(const EdgeEnds& e, double ax, double bx) {
  if (e.from.y == e.to.y && e.to.x > e.from.x) {
    const double lift = 26 + 6.0 * e.dim;  // a quadratic arc peaks at half of it
    return "M" + point(ax, e.from.y) + " Q" + point((ax + bx) / 2, e.from.y - lift) + " " +
           point(bx, e.to.y);
  }
  const double dip = 14 + 4.0 * e.dim;
  if (e.from.y == e.to.y) {
    return "M" + point(ax, e.from.bottom()) + " C" + point(ax, e.from.bottom() + dip) + " " +
           point(bx, e.to.bottom() + dip) + " " + point(bx, e.to.bottom());
  }
  if (e.to.y > e.from.y) {
    const double middle = (e.from.bottom() + e.to.y) / 2;
    return "M" + point(ax, e.from.bottom()) + " C" + point(ax, middle) + " " + point(bx, middle) +
           " " + point(bx, e.to.y);
  }
  return "M" + point(ax, e.from.bottom()) + " V" + svg::coordinate(e.from.bottom() + dip) + " H" +
         svg::coordinate(e.from_container.x + 3 + 1.5 * e.dim) + " V" +
         svg::coordinate(e.to.y - 6 - 2.0 * e.dim) + " H" + svg::coordinate(bx) + " V" +
         svg::coordinate(e.to.y);
}

/// Between containers of one row: a curve through the gutter below the row, deeper for later
/// dimensions, rings and the backward direction.
std::string along_row_path(const EdgeEnds& e, double x0, double x1) {
  const double dip = 16 + 8.0 * e.dim + (e.forward ? 0 : 4) + 5.0 * (e.lane % kRoute.lanes);
  return "M" + point(x0, e.from.bottom()) + " C" + point(x0, e.from_container.bottom() + dip) +
         " " + point(x1, e.to_container.bottom() + dip) + " " + point(x1, e.to.bottom());
}

/// Between rows: straight runs along gutters only (down into the gutter below the sender's row,
/// along it to the column gutter left of the receiver, along that to the receiver's row, and
/// in), each dimension, ring and direction on a track of its own, so no line crosses a host.
std::string between_rows_path(const EdgeEnds& e, double x0, double x1) {
  const double row = 10 + track(e) * kRoute.row_gap;
  const bool below = e.to_container.y >= e.from_container.bottom();
  const double y2 = below ? e.to_container.y - row : e.to_container.bottom() + row;
  const double gx = e.to_container.x - 8 - track(e) * kRoute.column_gap;
  return "M" + point(x0, e.from.bottom()) + " V" +
         svg::coordinate(e.from_container.bottom() + row) + " H" + svg::coordinate(gx) + " V" +
         svg::coordinate(y2) + " H" + svg::coordinate(x1) + " V" +
         svg::coordinate(below ? e.to.y : e.to.bottom());
}

}  // namespace

Layout layout_hosts(const Model& model, const Box& legend) {
  Layout out;
  out.legend = {kMargin, kMargin, legend.w, legend.h};
  std::vector<std::pair<int, Box>> ranks;
  std::vector<std::vector<std::pair<int, Box>>> host_ranks(model.hosts.size());
  Box cell;
  for (size_t h = 0; h < model.hosts.size(); ++h) {
    out.hosts.push_back(layout_host(model.hosts[h], host_ranks[h]));
    cell.w = std::max(cell.w, out.hosts.back().box.w);
    cell.h = std::max(cell.h, out.hosts.back().box.h);
  }
  out.ranks.resize(model.ranks.size());
  double y = out.legend.bottom() + kRack.gap;
  for (const std::vector<int>& rack : model.racks) {
    std::vector<Box> cells;
    const Box grid = place_grid(rack.size(), cell, kMargin + kHost.gap_x, y + kRack.header, cells);
    out.racks.push_back({kMargin, y, grid.w + kHost.gap_x + kRack.pad, kRack.header + grid.h});
    for (size_t i = 0; i < rack.size(); ++i) {
      const size_t h = static_cast<size_t>(rack[i]);
      shift(out.hosts[h], cells[i].x, cells[i].y);
      for (auto& [rank, box] : host_ranks[h]) {
        shift(box, cells[i].x, cells[i].y);
        out.ranks[static_cast<size_t>(rank)] = box;
      }
    }
    y = out.racks.back().bottom() + kRack.gap;
  }
  out.page = page_around(out);
  return out;
}

Layout layout_racks(const Model& model, const Box& legend) {
  Layout out;
  out.legend = {kMargin, kMargin, legend.w, legend.h};
  const Box cell{0, 0, kRack.box.w, kRack.box.h};
  const Box grid = place_grid(model.racks.size(), cell, kMargin + kHost.gap_x,
                              out.legend.bottom() + kRack.gap, out.racks);
  out.page = page_around(out);
  out.page.h = std::max(out.page.h, grid.bottom() + kMargin);
  return out;
}

std::string edge_path(const EdgeEnds& e) {
  const double offset = 9.0 * (e.dim - 1);  // dimensions leave and enter a rank side by side
  const double ax = e.from.center_x() + offset, bx = e.to.center_x() + offset;
  if (e.from_container.x == e.to_container.x && e.from_container.y == e.to_container.y)
    return inside_path(e, ax, bx);
  const double side = e.forward ? -4 : 4;
  if (e.from_container.y == e.to_container.y) return along_row_path(e, ax + side, bx + side);
  return between_rows_path(e, ax + side, bx + side);
}

}  // namespace ddl::ddlrun::picture
