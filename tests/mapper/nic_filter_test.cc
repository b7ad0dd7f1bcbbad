#include "mapper/nic_filter.h"

#include <gtest/gtest.h>

namespace ddl::mapper {
namespace {

using Names = std::vector<std::string>;

const Names kInterfaces = {"lo", "eth0", "eth1", "ib0", "docker0", "veth12ab", "enp1s0", "ib1"};

std::string error_of(std::string_view spec) {
  try {
    parse_nic_filter(spec);
  } catch (const NicFilterError& e) {
    return e.what();
  }
  return "no error";
}

TEST(NicFilterTest, EmptyFilterPrefersInfiniBandAndSkipsVirtual) {
  const NicFilter none = parse_nic_filter("");
  EXPECT_TRUE(none.names.empty());
  EXPECT_EQ(select_interfaces(kInterfaces, none), (Names{"ib0", "ib1", "eth0", "eth1", "enp1s0"}));
}

TEST(NicFilterTest, PrefixesSelect) {
  const NicFilter f = parse_nic_filter("eth,en");
  EXPECT_FALSE(f.exclude);
  EXPECT_FALSE(f.exact);
  EXPECT_EQ(f.names, (Names{"eth", "en"}));
  EXPECT_EQ(select_interfaces(kInterfaces, f), (Names{"eth0", "eth1", "enp1s0"}));
  EXPECT_EQ(f.str(), "eth,en");
}

TEST(NicFilterTest, CaretExcludes) {
  const NicFilter f = parse_nic_filter("^ib,eth1");
  EXPECT_TRUE(f.exclude);
  EXPECT_EQ(select_interfaces(kInterfaces, f), (Names{"eth0", "enp1s0"}));
  EXPECT_FALSE(f.selects_explicitly("lo"));
}

TEST(NicFilterTest, EqualsMatchesWholeNames) {
  EXPECT_EQ(select_interfaces(kInterfaces, parse_nic_filter("=eth")), Names{});
  EXPECT_EQ(select_interfaces(kInterfaces, parse_nic_filter("=eth1")), (Names{"eth1"}));
  const NicFilter f = parse_nic_filter("^=eth1,ib0");
  EXPECT_TRUE(f.exclude);
  EXPECT_TRUE(f.exact);
  EXPECT_EQ(select_interfaces(kInterfaces, f), (Names{"ib1", "eth0", "enp1s0"}));
  EXPECT_EQ(f.str(), "^=eth1,ib0");
}

TEST(NicFilterTest, VirtualInterfacesOnlyWhenAskedFor) {
  EXPECT_EQ(select_interfaces(kInterfaces, parse_nic_filter("lo")), (Names{"lo"}));
  EXPECT_EQ(select_interfaces(kInterfaces, parse_nic_filter("docker,veth")),
            (Names{"docker0", "veth12ab"}));
  EXPECT_EQ(select_interfaces({"lo", "veth0"}, parse_nic_filter("")), Names{});
  for (const char* v :
       {"lo", "docker0", "veth1", "virbr0", "br-1234", "cni0", "flannel.1", "vxlan0"}) {
    EXPECT_TRUE(is_virtual_interface(v)) << v;
  }
  for (const char* p : {"eth0", "ib0", "enp1s0f0", "bond0", "lom1", "hsn0"}) {
    EXPECT_FALSE(is_virtual_interface(p)) << p;
  }
}

TEST(NicFilterTest, Errors) {
  EXPECT_EQ(error_of("^"),
            "--nic '^' names no interface; write prefixes such as 'ib,eth', '^docker' or '=eth0'");
  EXPECT_EQ(error_of("="),
            "--nic '=' names no interface; write prefixes such as 'ib,eth', '^docker' or '=eth0'");
  EXPECT_EQ(error_of("ib,,eth"), "--nic 'ib,,eth': name 2 is empty; remove the extra ','");
  EXPECT_EQ(error_of("ib,"), "--nic 'ib,': name 2 is empty; remove the extra ','");
  EXPECT_EQ(error_of("ib, eth"),
            "--nic 'ib, eth': ' eth' holds a blank; separate names with ',' alone");
}

}  // namespace
}  // namespace ddl::mapper
