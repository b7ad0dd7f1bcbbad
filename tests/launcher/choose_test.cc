#include "launcher/choose.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace ddl::launcher {
namespace {

TEST(ChooseTest, NamesRoundTrip) {
  for (std::string_view name : kind_names()) {
    auto kind = kind_from_string(name);
    ASSERT_TRUE(kind.has_value()) << name;
    EXPECT_EQ(to_string(*kind), name);
  }
  EXPECT_FALSE(kind_from_string("mpiexec").has_value());
  EXPECT_EQ(kind_names().size(), 8u);
}

TEST(ChooseTest, AutoPrefersBatchSystemsThenLocalThenSsh) {
  EXPECT_EQ(choose(Kind::kAuto, {true, true, true}).kind, Kind::kJsrun);
  EXPECT_EQ(choose(Kind::kAuto, {true, false, false}).reason,
            "inside an LSF job ($LSB_JOBID is set)");
  EXPECT_EQ(choose(Kind::kAuto, {false, true, true}).kind, Kind::kSrun);
  const Choice local = choose(Kind::kAuto, {false, false, true});
  EXPECT_EQ(local.kind, Kind::kLocal);
  EXPECT_EQ(local.reason, "every host is this host");
  const Choice ssh = choose(Kind::kAuto, {false, false, false});
  EXPECT_EQ(ssh.kind, Kind::kSsh);
  EXPECT_EQ(ssh.reason, "some hosts are remote and no batch system was found");
}

TEST(ChooseTest, NamedLauncherIsKept) {
  const Choice c = choose(Kind::kMpirun, {true, true, true});
  EXPECT_EQ(c.kind, Kind::kMpirun);
  EXPECT_EQ(c.reason, "asked for with --launcher mpirun");
}

TEST(ChooseTest, PmixIsDdlrunsOwnLauncherWithItsServer) {
  const Choice local = choose(Kind::kPmix, {true, true, true});
  EXPECT_EQ(local.kind, Kind::kLocal);
  EXPECT_EQ(local.reason,
            "asked for with --launcher pmix: ddlrun's own launcher with its PMIx server (local: "
            "every host is this host)");
  const Choice ssh = choose(Kind::kPmix, {false, false, false});
  EXPECT_EQ(ssh.kind, Kind::kSsh);
  EXPECT_EQ(ssh.reason,
            "asked for with --launcher pmix: ddlrun's own launcher with its PMIx server (ssh: "
            "some hosts are remote)");
  EXPECT_EQ(choose(Kind::kPrterun, {false, false, true}).kind, Kind::kPrterun);
}

TEST(ChooseTest, LocalHostNamesIncludeThisHostAndLoopback) {
  const std::vector<std::string> names = local_host_names();
  char buf[256] = {};
  ASSERT_EQ(gethostname(buf, sizeof buf - 1), 0);
  EXPECT_TRUE(is_local_host(buf, names));
  EXPECT_TRUE(is_local_host("localhost", names));
  EXPECT_TRUE(is_local_host("LOCALHOST", names));
  EXPECT_TRUE(is_local_host("127.0.0.1", names));
  EXPECT_TRUE(is_local_host("127.3.2.1", names));
  EXPECT_TRUE(is_local_host("::1", names));
  EXPECT_FALSE(is_local_host("node01.example.invalid", names));
  EXPECT_FALSE(is_local_host("10.200.255.254", names));
}

}  // namespace
}  // namespace ddl::launcher
