// The plan's picture: what it takes from a plan (picture_model, plan_legend), where the layout
// puts things (nothing outside its parent, no overlaps, no line between rows across a host), and
// what the SVG holds (a box per rank, a path per ring edge, racks in the summary, escaping).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "ddlrun/show/plan_picture.h"

namespace ddl::ddlrun {
namespace {

using picture::Box;
using picture::Layout;
using picture::Model;

std::optional<std::string> no_env(const char*, void*) {
  return std::nullopt;
}

/// The offline plan of `hosts` Summit nodes (node01...), like the golden plans.
JobPlan summit_plan(int hosts, std::optional<int> nodes = {},
                    std::optional<std::string> mode = {}) {
  char last[8];
  std::snprintf(last, sizeof last, "%02d", hosts);
  Options o;
  o.hosts = {"node[01-" + std::string(last) + "]"};
  o.host_xml = {"*=" + std::string(DDL_TEST_DATA_DIR) + "/topologies/summit-ac922.xml"};
  o.program = {"prog"};
  o.dry_run = true;
  o.job_id = "picture";
  o.nodes = nodes;
  o.mode = mode;
  return make_plan(o, no_env, nullptr);
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

TEST(PictureTest, ModelOfTwoSummitHosts) {
  const Model m = picture_model(summit_plan(2));
  ASSERT_EQ(m.hosts.size(), 2u);
  EXPECT_EQ(m.hosts[1].name, "node02");
  ASSERT_EQ(m.hosts[0].packages.size(), 2u);
  const picture::PackageInfo& p0 = m.hosts[0].packages[0];
  const picture::PackageInfo& p1 = m.hosts[1].packages[1];
  EXPECT_EQ(p0.ranks, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(p1.ranks, (std::vector<int>{9, 10, 11}));
  ASSERT_EQ(p0.core_owner.size(), 21u);
  EXPECT_EQ(p0.core_owner[0], 0);
  EXPECT_EQ(p0.core_owner[7], 1);
  EXPECT_EQ(p0.core_owner[20], 2);
  EXPECT_EQ(p1.core_owner[0], 9);
  EXPECT_NE(std::find(p0.nics.begin(), p0.nics.end(), "mlx5_1"), p0.nics.end());
  EXPECT_NE(std::find(p1.nics.begin(), p1.nics.end(), "mlx5_3"), p1.nics.end());
  EXPECT_EQ(p0.gpus, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(p1.gpus, (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(m.racks, (std::vector<std::vector<int>>{{0, 1}}));
  EXPECT_EQ(m.ranks[7].host, 1);
  EXPECT_EQ(m.ranks[7].detail,
            "rank 7 on node02, local rank 1, GPU 1 (0004:05:00.0), CPUs 28-55, NIC mlx5_1");
  EXPECT_EQ(m.rings.size(), 4u);
}

TEST(PictureTest, RacksAreTheModeDimensionAfterTheHost) {
  const Model racks = picture_model(summit_plan(36, 18));
  ASSERT_EQ(racks.racks.size(), 2u);
  EXPECT_EQ(racks.racks[1].front(), 18);
  EXPECT_EQ(racks.racks[1].size(), 18u);
  // 4x3 does not split at a host (6 ranks each): one rack.
  EXPECT_EQ(picture_model(summit_plan(2, {}, "p:4x3")).racks.size(), 1u);
}

TEST(PictureTest, LegendListsThePlanAndWhatIsAppended) {
  const JobPlan plan = summit_plan(2);
  picture::Legend legend = plan_legend(plan);
  ASSERT_EQ(legend.lines.size(), 4u);
  EXPECT_EQ(legend.lines[0].second,
            "p:6x2x1x1 (ranks per host x hosts per rack x racks per aisle x aisles)");
  EXPECT_EQ(legend.lines[1].second, "12 (2 hosts x 6)");
  EXPECT_EQ(legend.lines[2].second, "2");
  EXPECT_EQ(legend.lines[3], (std::pair<std::string, std::string>{"launcher", "ssh"}));
  legend.lines.emplace_back("predicted 16 MiB", "1.2 ms");
  const std::string svg = plan_svg(plan, legend);
  EXPECT_NE(svg.find(">predicted 16 MiB: 1.2 ms</text>"), std::string::npos);
  EXPECT_NE(svg.find(">ddlrun plan: p:6x2x1x1</text>"), std::string::npos);
  EXPECT_NE(svg.find(">dim 1: 6 rings of 2, between hosts</text>"), std::string::npos);
  EXPECT_NE(svg.find(">dim 2: size 1, nothing to reduce</text>"), std::string::npos);
  EXPECT_EQ(plan_legend(summit_plan(36, 18)).lines[2].second, "36 in 2 racks of 18");
}

TEST(PictureTest, DetailedPictureHasEveryRankAndEveryRingEdge) {
  const std::string svg = plan_svg(summit_plan(2), {});
  for (int r = 0; r < 12; ++r)
    EXPECT_NE(svg.find(">rank " + std::to_string(r) + "</text>"), std::string::npos) << r;
  EXPECT_EQ(count(svg, "<title>dim "), 24u);  // 2 rings of 6, 6 rings of 2
  EXPECT_NE(svg.find("<title>dim 0 ring 1: rank 11 -&gt; rank 6</title>"), std::string::npos);
  EXPECT_NE(svg.find("<title>dim 1 ring 5: rank 11 -&gt; rank 5</title>"), std::string::npos);
  EXPECT_NE(svg.find("<title>host node02: ranks 6-11</title>"), std::string::npos);
  EXPECT_NE(svg.find(">package 1, 21 cores, GPUs 3 4 5</text>"), std::string::npos);
  EXPECT_EQ(count(svg, "marker-end=\"url(#arrow1)\""), 12u + 1);  // and the legend's key
}

TEST(PictureTest, ColoursRepeatAfterTheFifthDimension) {
  const std::string svg = plan_svg(summit_plan(2, {}, "p:1x1x1x1x1x6x2"), {});
  const size_t title = svg.find("<title>dim 5 ring 0: rank 0 -&gt; rank 1</title>");
  ASSERT_NE(title, std::string::npos);
  const std::string path = svg.substr(svg.rfind("<path", title), title - svg.rfind("<path", title));
  EXPECT_NE(path.find("class=\"ring d0\""), std::string::npos) << path;
  EXPECT_NE(path.find("marker-end=\"url(#arrow0)\""), std::string::npos) << path;
}

TEST(PictureTest, LayoutKeepsEveryBoxInsideItsParentWithoutOverlaps) {
  const Model m = picture_model(summit_plan(36, 18));
  const Layout l = picture::layout_hosts(m, {0, 0, 300, 120});
  ASSERT_EQ(l.racks.size(), 2u);
  ASSERT_EQ(l.ranks.size(), 216u);
  for (size_t r = 0; r < l.racks.size(); ++r) {
    EXPECT_TRUE(l.page.contains(l.racks[r]));
    EXPECT_FALSE(l.legend.overlaps(l.racks[r]));
    for (int h : m.racks[r])
      EXPECT_TRUE(l.racks[r].contains(l.hosts[static_cast<size_t>(h)].box)) << h;
  }
  for (size_t a = 0; a < l.hosts.size(); ++a) {
    for (size_t b = a + 1; b < l.hosts.size(); ++b)
      EXPECT_FALSE(l.hosts[a].box.overlaps(l.hosts[b].box)) << a << " " << b;
  }
  for (size_t r = 0; r < l.ranks.size(); ++r) {
    const picture::HostLayout& host = l.hosts[static_cast<size_t>(m.ranks[r].host)];
    EXPECT_TRUE(
        std::any_of(host.packages.begin(), host.packages.end(),
                    [&](const picture::PackageLayout& p) { return p.box.contains(l.ranks[r]); }))
        << r;
    for (size_t s = r + 1; s < l.ranks.size(); ++s)
      EXPECT_FALSE(l.ranks[r].overlaps(l.ranks[s])) << r << " " << s;
  }
}

/// The straight runs of a path written as "M x,y V y H x V y H x V y", each as the thin box it
/// covers.
std::vector<Box> runs(const std::string& d) {
  std::istringstream in(d);
  std::vector<Box> out;
  char c = 0, comma = 0;
  double x = 0, y = 0;
  in >> c >> x >> comma >> y;
  for (char op; in >> op;) {
    double v = 0;
    in >> v;
    const double x1 = op == 'H' ? v : x, y1 = op == 'V' ? v : y;
    out.push_back(
        {std::min(x, x1), std::min(y, y1), std::abs(x1 - x) + 0.01, std::abs(y1 - y) + 0.01});
    x = x1;
    y = y1;
  }
  return out;
}

TEST(PictureTest, RingEdgesBetweenRowsCrossNoHost) {
  const Model m = picture_model(summit_plan(36, 18));
  const Layout l = picture::layout_hosts(m, {0, 0, 300, 120});
  int checked = 0;
  for (size_t d = 1; d < m.rings.size(); ++d) {
    for (const comm::Ring& ring : m.rings[d]) {
      for (size_t i = 0; i < ring.size() && ring.size() > 1; ++i) {
        const auto a = static_cast<size_t>(ring[i]),
                   b = static_cast<size_t>(ring[(i + 1) % ring.size()]);
        const auto ha = static_cast<size_t>(m.ranks[a].host),
                   hb = static_cast<size_t>(m.ranks[b].host);
        if (l.hosts[ha].box.y == l.hosts[hb].box.y) continue;
        const std::string d_attr =
            picture::edge_path({l.ranks[a], l.ranks[b], l.hosts[ha].box, l.hosts[hb].box,
                                static_cast<int>(d), hb > ha, 0});
        const std::vector<Box> segments = runs(d_attr);
        ASSERT_EQ(segments.size(), 5u) << d_attr;
        for (const Box& segment : segments) {
          for (size_t h = 0; h < l.hosts.size(); ++h) {
            if (h == ha || h == hb) continue;
            EXPECT_FALSE(segment.overlaps(l.hosts[h].box)) << d_attr << " crosses host " << h;
          }
        }
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(PictureTest, RingClosingUpRowsOfOneHostLoopsAroundItsRanks) {
  Options o;
  o.hosts = {"localhost:16"};
  o.no_probe = true;
  o.program = {"prog"};
  o.dry_run = true;
  const Model m = picture_model(make_plan(o, no_env, nullptr));
  const Layout l = picture::layout_hosts(m, {0, 0, 300, 120});
  ASSERT_GT(l.ranks[15].y, l.ranks[0].y);  // rows of six
  const Box& host = l.hosts[0].box;
  const std::string d = picture::edge_path({l.ranks[15], l.ranks[0], host, host, 0, true, 0});
  const std::vector<Box> segments = runs(d);
  ASSERT_EQ(segments.size(), 5u) << d;
  for (const Box& segment : segments) {
    EXPECT_TRUE(host.contains(segment)) << d;
    for (size_t r = 1; r < 15; ++r)
      EXPECT_FALSE(segment.overlaps(l.ranks[r])) << d << " crosses rank " << r;
  }
}

TEST(PictureTest, MoreThan36HostsAreSummarisedPerRack) {
  const Model m = picture_model(summit_plan(72, 18));
  const std::string svg = picture::model_svg(m, "plan", {});
  EXPECT_EQ(count(svg, "class=\"rank\""), 0u);
  EXPECT_NE(svg.find(">rack 4: 18 hosts, ranks 324-431</text>"), std::string::npos);
  EXPECT_NE(svg.find(">hosts node55 ... node72</text>"), std::string::npos);
  EXPECT_NE(svg.find("<title>rack 1: node01, node02, "), std::string::npos);
  // Dimension 2's rings of 4 join racks 1->2->3->4->1, each pair by 108 ring edges.
  EXPECT_EQ(count(svg, "<title>dim 2: 108 ring edges from rack "), 4u);
  EXPECT_NE(svg.find("<title>dim 2: 108 ring edges from rack 4 to rack 1</title>"),
            std::string::npos);
  EXPECT_EQ(count(svg, "<title>dim 1"), 0u);  // inside racks
  EXPECT_EQ(count(svg, ">inside: dim 0 (rings of 6), dim 1 (rings of 18)</text>"), 4u);
}

TEST(PictureTest, TextFromUsersIsEscaped) {
  Model m;
  m.hosts = {{"<a&b>", {{-1, {}, {}, {"eth'0"}, {0}}}}};
  m.racks = {{0}};
  m.ranks = {{0, 0, 0, -1, "", "eth'0", "rank 0 on <a&b>"}};
  m.rings = {{{0}}};
  const std::string svg =
      picture::model_svg(m, "plan \"x\"", {{{"mode", "r (racks from a&b.conf)"}}});
  EXPECT_EQ(svg.find("<a&b>"), std::string::npos);
  EXPECT_NE(svg.find(">&lt;a&amp;b&gt;   ranks 0</text>"), std::string::npos);
  EXPECT_NE(svg.find("<title>NIC eth&apos;0</title>"), std::string::npos);
  EXPECT_NE(svg.find(">plan &quot;x&quot;</text>"), std::string::npos);
  EXPECT_NE(svg.find(">mode: r (racks from a&amp;b.conf)</text>"), std::string::npos);
}

}  // namespace
}  // namespace ddl::ddlrun
