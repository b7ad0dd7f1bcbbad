#include "mapper/placement.h"

#include <gtest/gtest.h>

namespace ddl::mapper {
namespace {

using hostfiles::Host;
using hostfiles::HostList;
using hostfiles::Position;
using hostfiles::SourceKind;

HostList hosts(std::vector<std::pair<std::string, int>> list) {
  HostList l;
  for (auto& [name, slots] : list) {
    l.add(Host{name, slots, std::nullopt, true, SourceKind::kHostsOption, "-H"},
          Position{"-H", 0, 0, {}});
  }
  return l;
}

std::vector<int> counts(const SlotPlacement& p) {
  std::vector<int> c;
  for (const HostRanks& h : p.hosts)
    c.push_back(h.count);
  return c;
}

TEST(PlacementTest, OneRankPerSlotByDefault) {
  const SlotPlacement p = place_by_slots(hosts({{"a", 4}, {"b", 4}}), {});
  EXPECT_EQ(p.ranks, 8);
  EXPECT_EQ(counts(p), (std::vector<int>{4, 4}));
  EXPECT_EQ(p.hosts[1].host, "b");
  EXPECT_EQ(p.hosts[1].first_rank, 4);
  EXPECT_EQ(p.describe(), "2 hosts x 4");
}

TEST(PlacementTest, AcceleratorsOverrideSlots) {
  const SlotPlacement p = place_by_slots(hosts({{"a", 42}, {"b", 42}}), {6, std::nullopt});
  EXPECT_EQ(p.ranks, 12);
  EXPECT_EQ(counts(p), (std::vector<int>{6, 6}));
}

TEST(PlacementTest, NpFillsHostsInOrder) {
  const SlotPlacement p = place_by_slots(hosts({{"a", 4}, {"b", 4}, {"c", 4}}), {std::nullopt, 6});
  EXPECT_EQ(p.ranks, 6);
  EXPECT_EQ(counts(p), (std::vector<int>{4, 2, 0}));
  EXPECT_EQ(p.hosts[2].first_rank, 6);
  EXPECT_EQ(p.describe(), "2 hosts: 4+2");
}

TEST(PlacementTest, UnevenSlots) {
  const SlotPlacement p = place_by_slots(hosts({{"a", 1}}), {});
  EXPECT_EQ(p.describe(), "1 host x 1");
}

TEST(PlacementTest, TooManyRanksIsAnError) {
  try {
    place_by_slots(hosts({{"a", 2}, {"b", 2}}), {std::nullopt, 5});
    FAIL();
  } catch (const PlacementError& e) {
    EXPECT_STREQ(e.what(),
                 "-n 5 asks for more ranks than the 2 hosts have places for: 4; add hosts or "
                 "slots (-H host:N), or lower -n");
  }
  try {
    place_by_slots(hosts({{"a", 8}}), {2, 3});
    FAIL();
  } catch (const PlacementError& e) {
    EXPECT_STREQ(e.what(),
                 "-n 3 asks for more ranks than the 1 host has places for: 2 (-a 2 per host); "
                 "add hosts or slots (-H host:N), or lower -n");
  }
}

TEST(PlacementTest, EmptyListIsAnError) {
  EXPECT_THROW(place_by_slots(HostList{}, {}), PlacementError);
}

}  // namespace
}  // namespace ddl::mapper
