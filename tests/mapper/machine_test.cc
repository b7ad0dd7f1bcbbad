#include "mapper/machine.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <vector>

#include "mapper/placement.h"

namespace ddl::mapper {
namespace {

/// The PlacementError text check_distinct_machines throws for `hosts`, "" when none.
std::string refusal(const std::vector<NamedHost>& hosts) {
  try {
    check_distinct_machines(hosts);
  } catch (const PlacementError& e) {
    return e.what();
  }
  return "";
}

constexpr const char* kA = "machine=aa;boot=b1;netns=4026531840;host=node1";
constexpr const char* kB = "machine=bb;boot=b2;netns=4026531840;host=node2";
// The namespace hosts of the tests: one kernel, their own network namespace and host name.
constexpr const char* kNs2 = "machine=aa;boot=b1;netns=4026532001;host=node2";

TEST(MachineIdentityTest, ReadsThisMachine) {
  const std::string id = read_machine_identity();
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(id.rfind("machine=", 0), 0u) << id;
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof host - 1), 0);
  EXPECT_EQ(identity_host_name(id), host);
  struct stat st {};
  ASSERT_EQ(stat("/proc/self/ns/net", &st), 0);
  EXPECT_NE(id.find(";netns=" + std::to_string(st.st_ino) + ";"), std::string::npos) << id;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  std::getline(boot, boot_id);
  EXPECT_NE(id.find(";boot=" + boot_id + ";"), std::string::npos) << id;
  EXPECT_EQ(read_machine_identity(), id);
}

TEST(MachineIdentityTest, HostNamePart) {
  EXPECT_EQ(identity_host_name(kA), "node1");
  EXPECT_EQ(identity_host_name("machine=x;boot=y"), "");
  EXPECT_EQ(identity_host_name(""), "");
}

TEST(DistinctMachinesTest, DistinctIdentitiesPass) {
  EXPECT_EQ(refusal({{"node1", "-H", kA, false}, {"node2", "-H", kB, false}}), "");
  EXPECT_EQ(refusal({{"node1", "-H", kA, false}, {"node2", "-H", kNs2, false}}), "");
  // Unknown identities and names that are neither this host nor addresses: nothing to go by.
  EXPECT_EQ(refusal({{"a", "-H", "", false}, {"b", "-H", "", false}}), "");
  EXPECT_EQ(refusal({}), "");
}

TEST(DistinctMachinesTest, SameIdentityIsRefusedNamingBothSpellings) {
  EXPECT_EQ(refusal({{"node1", "hosts.txt:1", kA, false},
                     {"node2", "hosts.txt:2", kB, false},
                     {"10.200.0.10", "hosts.txt:3", kA, false}}),
            "'10.200.0.10' (hosts.txt:3) and 'node1' (hosts.txt:1) are the same machine: their "
            "probes found one machine (the same machine id, boot id and network namespace, host "
            "name 'node1'); list each machine once, under one name, with all its slots");
}

TEST(DistinctMachinesTest, WithoutIdentitiesThisHostAndEqualAddressesAreOneMachine) {
  EXPECT_EQ(refusal({{"localhost", "-H", "", true}, {"127.0.0.1", "-H", "", true}}),
            "'127.0.0.1' (-H) and 'localhost' (-H) are the same machine: both are this host; "
            "list each machine once, under one name, with all its slots");
  EXPECT_EQ(refusal({{"10.0.0.7", "-H", "", false},
                     {"[fe80::1]", "-H", "", false},
                     {"fe80:0:0::1", "-H", "", false}}),
            "'fe80:0:0::1' (-H) and '[fe80::1]' (-H) are the same machine: both are the address "
            "fe80::1; list each machine once, under one name, with all its slots");
  // One name probed, the other not (--host-xml for one): still both this host.
  EXPECT_EQ(refusal({{"localhost", "-H", kA, true}, {"127.0.0.1", "-H", "", true}}),
            "'127.0.0.1' (-H) and 'localhost' (-H) are the same machine: both are this host; "
            "list each machine once, under one name, with all its slots");
}

TEST(DistinctMachinesTest, IdentitiesWinOverAddresses) {
  // Two probed names that are both "this host" by name but found distinct machines (a
  // container's own network namespace) are two machines.
  EXPECT_EQ(refusal({{"localhost", "-H", kA, true}, {"127.0.0.2", "-H", kNs2, true}}), "");
}

TEST(DistinctMachinesTest, ScalesToManyHosts) {
  std::vector<NamedHost> hosts;
  for (int i = 0; i < 20000; ++i)
    hosts.push_back({"n" + std::to_string(i), "-H", "", false});
  EXPECT_EQ(refusal(hosts), "");
}

}  // namespace
}  // namespace ddl::mapper
