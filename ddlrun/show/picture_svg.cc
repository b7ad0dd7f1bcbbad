// Draws a picture::Model: the legend, then either every host (packages, cores coloured by the
// rank bound to them, NICs, rank boxes) with every ring edge as an arrow, or one box per rack
// with an arrow per dimension and pair of racks that its rings join. Colours: a pale fill per
// local rank, repeated in its cores; a colour per ring dimension, keyed in the legend.
#include "ddlrun/show/picture_svg.h"

#include <algorithm>
#include <array>
#include <map>
#include <tuple>

namespace ddl::ddlrun::picture {

namespace {

using svg::Writer;

constexpr std::array<const char*, 8> kRankFill = {"#cfe2f3", "#d9ead3", "#fff2cc", "#f4cccc",
                                                  "#d9d2e9", "#fce5cd", "#d0e0e3", "#ead1dc"};
constexpr std::array<const char*, 8> kRankStroke = {"#3d85c6", "#6aa84f", "#bf9000", "#cc0000",
                                                    "#674ea7", "#e69138", "#45818e", "#a64d79"};
constexpr std::array<const char*, 5> kDimColour = {"#1f4e9c", "#c0392b", "#1e8449", "#7d3c98",
                                                   "#d35400"};
constexpr double kLineH = 16;
constexpr double kCharW = 6.6;  // DejaVu Sans at 11px, a generous average

const char* dim_colour(size_t dim) {
  return kDimColour[dim % kDimColour.size()];
}

/// The class and marker of dimension `dim`'s arrows (colours repeat after kDimColour's).
std::string ring_class(size_t dim) {
  return "ring d" + std::to_string(dim % kDimColour.size());
}
svg::Attributes arrow_head(size_t dim) {
  return {{"marker-end", "url(#arrow" + std::to_string(dim % kDimColour.size()) + ")"}};
}

std::string style() {
  std::string s =
      "text { font-family: 'DejaVu Sans', Arial, sans-serif; font-size: 10px; fill: #222; }\n"
      ".h1 { font-size: 16px; font-weight: bold; }\n"
      ".h2 { font-size: 13px; font-weight: bold; }\n"
      ".h3 { font-size: 11px; font-weight: bold; }\n"
      ".key { font-size: 11px; }\n"
      ".small { font-size: 9px; fill: #555; }\n"
      ".legend { fill: #ffffff; stroke: #333; }\n"
      ".rack { fill: #f6f6f6; stroke: #888; stroke-dasharray: 6 3; }\n"
      ".host { fill: #ffffff; stroke: #333; stroke-width: 1.5; }\n"
      ".package { fill: #eef1f6; stroke: #a0a8b8; }\n"
      ".core { stroke: #ffffff; stroke-width: 0.6; }\n"
      ".nic { fill: #ffffff; stroke: #666; }\n"
      ".rank { stroke-width: 1.5; }\n"
      ".ring { fill: none; stroke-width: 1.4; stroke-opacity: 0.85; }\n";
  for (size_t d = 0; d < kDimColour.size(); ++d)
    s += ".d" + std::to_string(d) + " { stroke: " + dim_colour(d) + "; }\n";
  return s;
}

void define_markers(Writer& w) {
  for (size_t d = 0; d < kDimColour.size(); ++d) {
    w.define("<marker id=\"arrow" + std::to_string(d) +
             "\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"6\" "
             "markerHeight=\"6\" orient=\"auto\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"" +
             dim_colour(d) + "\"/></marker>");
  }
}

/// The first and last of some ranks; first -1 when there are none.
struct RankRange {
  int first = -1;
  int last = -1;

  void add(const RankRange& other) {
    if (other.first < 0) return;
    first = first < 0 ? other.first : std::min(first, other.first);
    last = std::max(last, other.last);
  }
  std::string str() const {
    return first == last ? std::to_string(first)
                         : std::to_string(first) + "-" + std::to_string(last);
  }
};

/// Each host's ranks, by host index.
std::vector<RankRange> host_ranges(const Model& m) {
  std::vector<RankRange> out(m.hosts.size());
  for (const RankInfo& r : m.ranks)
    out[static_cast<size_t>(r.host)].add({r.rank, r.rank});
  return out;
}

/// Calls visit(dimension, ring index, from rank, to rank) for every edge of every ring of two
/// or more ranks.
template <typename Visit>
void for_each_ring_edge(const Model& m, Visit visit) {
  for (size_t d = 0; d < m.rings.size(); ++d) {
    for (size_t k = 0; k < m.rings[d].size(); ++k) {
      const comm::Ring& ring = m.rings[d][k];
      for (size_t i = 0; i < ring.size() && ring.size() > 1; ++i)
        visit(d, k, static_cast<size_t>(ring[i]), static_cast<size_t>(ring[(i + 1) % ring.size()]));
    }
  }
}

/// The racks' index for each host.
std::vector<int> rack_of_host(const Model& m) {
  std::vector<int> out(m.hosts.size(), 0);
  for (size_t r = 0; r < m.racks.size(); ++r)
    for (int h : m.racks[r])
      out[static_cast<size_t>(h)] = static_cast<int>(r);
  return out;
}

/// Where each dimension's rings run: "inside hosts", "between hosts" or "between racks".
std::vector<std::string> dimension_scopes(const Model& m) {
  const std::vector<int> rack = rack_of_host(m);
  std::vector<bool> all_inside(m.rings.size(), true), all_racks(m.rings.size(), true);
  for_each_ring_edge(m, [&](size_t d, size_t, size_t a, size_t b) {
    const auto ha = static_cast<size_t>(m.ranks[a].host), hb = static_cast<size_t>(m.ranks[b].host);
    all_inside[d] = all_inside[d] && ha == hb;
    all_racks[d] = all_racks[d] && rack[ha] != rack[hb];
  });
  std::vector<std::string> out;
  for (size_t d = 0; d < m.rings.size(); ++d)
    out.push_back(all_inside[d]  ? "inside hosts"
                  : all_racks[d] ? "between racks"
                                 : "between hosts");
  return out;
}

/// The legend's text lines after the heading: its own lines, then one per ring dimension.
std::vector<std::string> legend_lines(const Model& m, const Legend& legend) {
  const std::vector<std::string> scopes = dimension_scopes(m);
  std::vector<std::string> lines;
  for (const auto& [key, value] : legend.lines)
    lines.push_back(key + ": " + value);
  for (size_t d = 0; d < m.rings.size(); ++d) {
    const size_t size = m.rings[d].empty() ? 0 : m.rings[d][0].size();
    lines.push_back("dim " + std::to_string(d) + ": " +
                    (size < 2 ? std::string("size 1, nothing to reduce")
                              : std::to_string(m.rings[d].size()) +
                                    (m.rings[d].size() == 1 ? " ring of " : " rings of ") +
                                    std::to_string(size) + ", " + scopes[d]));
  }
  return lines;
}

Box legend_size(const std::string& heading, const std::vector<std::string>& lines) {
  size_t chars = heading.size() + 4;
  for (const std::string& l : lines)
    chars = std::max(chars, l.size() + 6);
  return {0, 0, static_cast<double>(chars) * kCharW + 24,
          34 + static_cast<double>(lines.size()) * kLineH};
}

void draw_legend(Writer& w, const Box& box, const std::string& heading, const Model& m,
                 const std::vector<std::string>& lines) {
  w.rect(box, "legend");
  w.text(box.x + 12, box.y + 22, heading, "h1");
  const size_t first_dim = lines.size() - m.rings.size();
  for (size_t i = 0; i < lines.size(); ++i) {
    const double y = box.y + 40 + static_cast<double>(i) * kLineH;
    double x = box.x + 12;
    const size_t d = i - first_dim;
    if (i >= first_dim && m.rings[d].size() < m.ranks.size()) {
      w.path("M" + svg::coordinate(x) + "," + svg::coordinate(y - 4) + " h26", ring_class(d),
             arrow_head(d));
      x += 34;
    }
    w.text(x, y, lines[i], "key");
  }
}

void draw_rank(Writer& w, const RankInfo& r, const Box& box) {
  const size_t colour = static_cast<size_t>(r.local_rank) % kRankFill.size();
  w.rect(box, "rank", {{"fill", kRankFill[colour]}, {"stroke", kRankStroke[colour]}}, r.detail);
  const double x = box.x + 6;
  w.text(x, box.y + 14, "rank " + std::to_string(r.rank), "h3");
  w.text(x, box.y + 26, r.gpu < 0 ? std::string("no GPU") : "GPU " + std::to_string(r.gpu),
         "small");
  const std::string cpus = r.cpus.empty() ? std::string("not bound") : "cpus " + r.cpus;
  w.text(x, box.y + 38, cpus.size() <= 16 ? cpus : "cpus " + r.cpus.substr(0, 9) + "...", "small");
  w.text(x, box.y + 50, r.nic.empty() ? std::string("no NIC") : "nic " + r.nic, "small");
}

/// The core strip: one cell per core, coloured by the local rank bound to it, grey if none.
void draw_cores(Writer& w, const Model& m, const PackageInfo& p, const Box& strip) {
  const double cell = strip.w / static_cast<double>(p.core_owner.size());
  for (size_t c = 0; c < p.core_owner.size(); ++c) {
    const int owner = p.core_owner[c];
    const char* fill =
        owner < 0
            ? "#d8d8d8"
            : kRankStroke[static_cast<size_t>(m.ranks[static_cast<size_t>(owner)].local_rank) %
                          kRankStroke.size()];
    w.rect({strip.x + static_cast<double>(c) * cell, strip.y, cell, strip.h}, "core",
           {{"fill", fill}});
  }
}

void draw_package(Writer& w, const Model& m, const PackageInfo& p, const PackageLayout& l) {
  w.rect(l.box, "package");
  const std::string title =
      p.os_index < 0 ? std::string("no package") : "package " + std::to_string(p.os_index);
  std::string about = title;
  if (!p.core_owner.empty()) about += ", " + std::to_string(p.core_owner.size()) + " cores";
  for (size_t i = 0; i < p.gpus.size(); ++i)
    about += (i ? " " : ", GPUs ") + std::to_string(p.gpus[i]);
  w.text(l.box.x + 6, l.box.y + 13, about, "small");
  if (!p.core_owner.empty()) draw_cores(w, m, p, l.cores);
  for (size_t i = 0; i < p.nics.size(); ++i) {
    w.rect(l.nics[i], "nic", {}, "NIC " + p.nics[i]);
    w.text(l.nics[i].x + 4, l.nics[i].y + 12, p.nics[i], "small");
  }
}

void draw_host(Writer& w, const Model& m, size_t h, const Layout& l, const RankRange& ranks) {
  const HostInfo& host = m.hosts[h];
  const HostLayout& hl = l.hosts[h];
  w.begin_group("hostgroup", "host " + host.name + ": ranks " + ranks.str());
  w.rect(hl.box, "host");
  w.text(hl.box.x + 8, hl.box.y + 16, host.name + "   ranks " + ranks.str(), "h2");
  for (size_t p = 0; p < host.packages.size(); ++p) {
    draw_package(w, m, host.packages[p], hl.packages[p]);
    for (int r : host.packages[p].ranks)
      draw_rank(w, m.ranks[static_cast<size_t>(r)], l.ranks[static_cast<size_t>(r)]);
  }
  w.end_group();
}

/// Every edge of every ring of size 2 or more, each a path with an arrow and a title.
void draw_rank_rings(Writer& w, const Model& m, const Layout& l) {
  for_each_ring_edge(m, [&](size_t d, size_t k, size_t a, size_t b) {
    const auto ha = static_cast<size_t>(m.ranks[a].host);
    const auto hb = static_cast<size_t>(m.ranks[b].host);
    const EdgeEnds e{l.ranks[a],          l.ranks[b], l.hosts[ha].box,    l.hosts[hb].box,
                     static_cast<int>(d), hb >= ha,   static_cast<int>(k)};
    w.path(edge_path(e), ring_class(d), arrow_head(d),
           "dim " + std::to_string(d) + " ring " + std::to_string(k) + ": rank " +
               std::to_string(a) + " -> rank " + std::to_string(b));
  });
}

/// "rack 2: 18 hosts, ranks 108-215".
std::string rack_label(const Model& m, size_t r, const std::vector<RankRange>& by_host) {
  RankRange ranks;
  for (int h : m.racks[r])
    ranks.add(by_host[static_cast<size_t>(h)]);
  return "rack " + std::to_string(r + 1) + ": " + std::to_string(m.racks[r].size()) +
         (m.racks[r].size() == 1 ? " host" : " hosts") + ", ranks " + ranks.str();
}

/// The detailed picture: racks, hosts, ranks, every ring edge.
void draw_hosts(Writer& w, const Model& m, const Layout& l) {
  const std::vector<RankRange> ranks = host_ranges(m);
  for (size_t r = 0; r < m.racks.size(); ++r) {
    w.rect(l.racks[r], "rack");
    w.text(l.racks[r].x + 10, l.racks[r].y + 19, rack_label(m, r, ranks), "h2");
  }
  for (size_t h = 0; h < m.hosts.size(); ++h)
    draw_host(w, m, h, l, ranks[h]);
  draw_rank_rings(w, m, l);
}

/// The dimensions whose rings stay inside racks: "dim 0 (rings of 6), dim 1 (rings of 18)".
std::string dimensions_inside_racks(const Model& m) {
  const std::vector<std::string> scopes = dimension_scopes(m);
  std::string out;
  for (size_t d = 0; d < m.rings.size(); ++d) {
    const size_t size = m.rings[d].empty() ? 0 : m.rings[d][0].size();
    if (size < 2 || scopes[d] == "between racks") continue;
    out += (out.empty() ? "" : ", ") + ("dim " + std::to_string(d)) + " (rings of " +
           std::to_string(size) + ")";
  }
  return out;
}

/// A box per rack: its hosts (all of them in its title), its ranks, the rings inside it.
void draw_rack_boxes(Writer& w, const Model& m, const Layout& l) {
  const std::string inside = dimensions_inside_racks(m);
  const std::vector<RankRange> ranks = host_ranges(m);
  for (size_t r = 0; r < m.racks.size(); ++r) {
    std::string names;
    for (int h : m.racks[r])
      names += (names.empty() ? "" : ", ") + m.hosts[static_cast<size_t>(h)].name;
    const Box& box = l.racks[r];
    w.rect(box, "host", {}, "rack " + std::to_string(r + 1) + ": " + names);
    w.text(box.x + 10, box.y + 20, rack_label(m, r, ranks), "h3");
    const std::string& first = m.hosts[static_cast<size_t>(m.racks[r].front())].name;
    const std::string& last = m.hosts[static_cast<size_t>(m.racks[r].back())].name;
    w.text(box.x + 10, box.y + 38, "hosts " + first + " ... " + last, "small");
    if (!inside.empty()) w.text(box.x + 10, box.y + 54, "inside: " + inside, "small");
  }
}

/// The summary: a box per rack, and one arrow per dimension and pair of racks that its rings
/// join, titled with how many ring edges it stands for.
void draw_racks(Writer& w, const Model& m, const Layout& l) {
  draw_rack_boxes(w, m, l);
  const std::vector<int> rack = rack_of_host(m);
  std::map<std::tuple<size_t, int, int>, int> joined;  // (dim, from, to) -> ring edges
  for_each_ring_edge(m, [&](size_t d, size_t, size_t a, size_t b) {
    const int ra = rack[static_cast<size_t>(m.ranks[a].host)];
    const int rb = rack[static_cast<size_t>(m.ranks[b].host)];
    if (ra != rb) ++joined[{d, ra, rb}];
  });
  for (const auto& [key, count] : joined) {
    const auto [d, a, b] = key;
    const Box& from = l.racks[static_cast<size_t>(a)];
    const Box& to = l.racks[static_cast<size_t>(b)];
    w.path(edge_path({from, to, from, to, static_cast<int>(d), b >= a}), ring_class(d),
           arrow_head(d),
           "dim " + std::to_string(d) + ": " + std::to_string(count) + " ring edges from rack " +
               std::to_string(a + 1) + " to rack " + std::to_string(b + 1));
  }
}

}  // namespace

std::string model_svg(const Model& model, const std::string& heading, const Legend& legend) {
  const std::vector<std::string> lines = legend_lines(model, legend);
  const Box size = legend_size(heading, lines);
  const bool detailed = model.hosts.size() <= static_cast<size_t>(kMaxDetailedHosts);
  const Layout layout = detailed ? layout_hosts(model, size) : layout_racks(model, size);
  Writer w(layout.page.w, layout.page.h, style());
  define_markers(w);
  w.rect(layout.page, "", {{"fill", "#ffffff"}});
  draw_legend(w, layout.legend, heading, model, lines);
  if (detailed) {
    draw_hosts(w, model, layout);
  } else {
    draw_racks(w, model, layout);
  }
  return w.finish();
}

}  // namespace ddl::ddlrun::picture
