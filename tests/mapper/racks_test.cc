#include "mapper/racks.h"

#include <gtest/gtest.h>

#include "hostfiles/input_error.h"

namespace ddl::mapper {
namespace {

using Rack = std::map<std::string, std::string>;

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const hostfiles::InputError& e) {
    return e.what();
  } catch (const RackError& e) {
    return e.what();
  }
  return "no error";
}

TEST(RacksTest, ParsesLeafSwitches) {
  const Rack r = parse_slurm_topology(
      "# Summit-like\nSwitchName=s1 Nodes=a[01-02] LinkSpeed=100\r\n\nSwitchName=s2 Nodes=b1,b2\n"
      "SwitchName=top Switches=s[1-2]\n",
      "topology.conf");
  EXPECT_EQ(r, (Rack{{"a01", "s1"}, {"a02", "s1"}, {"b1", "s2"}, {"b2", "s2"}}));
}

TEST(RacksTest, ParseErrorsPointAtTheEntry) {
  EXPECT_EQ(error_of([] { parse_slurm_topology("SwitchName=s1 Node=a[1-2]\n", "t.conf"); }),
            "t.conf:1:15: unknown entry 'Node=a[1-2]' (did you mean 'Nodes'?); topology.conf lines "
            "read 'SwitchName=s1 Nodes=node[01-18]'\n"
            "  SwitchName=s1 Node=a[1-2]\n"
            "                ^~~~~~~~~~~");
  EXPECT_EQ(error_of([] { parse_slurm_topology("Nodes=a1\n", "t.conf"); }),
            "t.conf:1:1: no SwitchName= on this line; every line names its switch\n"
            "  Nodes=a1\n"
            "  ^");
  EXPECT_EQ(error_of([] {
              parse_slurm_topology("SwitchName=s1 Nodes=a[1-2]\nSwitchName=s2 Nodes=a2\n",
                                   "t.conf");
            }),
            "t.conf:2:21: host 'a2' is already under switch 's1' (line 1); a host belongs to one "
            "leaf switch\n"
            "  SwitchName=s2 Nodes=a2\n"
            "                      ^~");
  EXPECT_EQ(error_of([] {
              parse_slurm_topology("SwitchName=s1 Nodes=a[3-1]\n", "t.conf");
            }).substr(0, 12),
            "t.conf:1:23:");
  EXPECT_EQ(error_of([] { read_slurm_topology("/nonexistent/topology.conf"); }),
            "/nonexistent/topology.conf: cannot read topology.conf: No such file or directory");
}

TEST(RacksTest, HostsPerRackFromSwitches) {
  const Rack r = {{"a1", "s1"}, {"a2", "s1"}, {"b1", "s2"}, {"b2", "s2"}, {"c1", "s3"}};
  EXPECT_EQ(hosts_per_rack_from({"a1", "a2", "b1", "b2"}, r), 2);
  EXPECT_EQ(hosts_per_rack_from({"a1"}, r), 1);
  EXPECT_EQ(error_of([&] {
              hosts_per_rack_from({"a1", "a2", "c1"}, r);
            }),
            "switches hold different numbers of this job's hosts ('s1': 2, 's3': 1); the ring "
            "layout needs equal racks: use whole racks, or give --nodes or -m");
  EXPECT_EQ(error_of([&] {
              hosts_per_rack_from({"a1", "b1", "a2", "b2"}, r);
            }),
            "hosts of switch 's1' are not listed together (host 'a2' comes after another "
            "switch's hosts); list each rack's hosts together");
  EXPECT_EQ(error_of([&] {
              hosts_per_rack_from({"a1", "zz"}, r);
            }),
            "host 'zz' is under no switch in topology.conf; add it to a SwitchName= line");
}

TEST(RacksTest, IbmFourFieldDims) {
  EXPECT_EQ(ring_dims(6, 2, std::nullopt, std::nullopt), (std::vector<int>{6, 2, 1, 1}));
  EXPECT_EQ(ring_dims(6, 18, std::nullopt, std::nullopt), (std::vector<int>{6, 18, 1, 1}));
  EXPECT_EQ(ring_dims(6, 36, 18, std::nullopt), (std::vector<int>{6, 18, 2, 1}));
  EXPECT_EQ(ring_dims(6, 4608, 18, 16), (std::vector<int>{6, 18, 16, 16}));
  EXPECT_EQ(error_of([] { ring_dims(6, 18, 4, std::nullopt); }),
            "18 hosts do not split into racks of 4 (--nodes 4); give a --nodes that divides 18");
  EXPECT_EQ(error_of([] { ring_dims(6, 36, 6, 4); }),
            "6 racks do not split into aisles of 4 (--racks 4); give a --racks that divides 6");
}

}  // namespace
}  // namespace ddl::mapper
