#include "launcher/choose.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <vector>

#include "launcher/descriptor.h"
#include "lsf/lsf.h"

namespace ddl::launcher {
namespace {

/// launcher's rows and lsf's jsrun, as ddlrun joins them.
BackendTable table() {
  static const std::vector<const BackendDescriptor*> rows = [] {
    std::vector<const BackendDescriptor*> v(builtin_backends().begin(), builtin_backends().end());
    v.push_back(&lsf::kJsrunBackend);
    return v;
  }();
  return rows;
}

Choice choose(std::string_view requested, const Situation& s) {
  return launcher::choose(table(), requested, s);
}

std::string_view name(const Choice& c) {
  return c.backend->name;
}

TEST(ChooseTest, NamesRoundTrip) {
  for (const BackendDescriptor* b : table())
    EXPECT_EQ(find_backend(table(), b->name), b) << b->name;
  EXPECT_EQ(find_backend(table(), "mpiexec"), nullptr);
  EXPECT_EQ(table().size(), 9u);
}

TEST(ChooseTest, AutoPrefersBatchSystemsThenLocalThenSsh) {
  EXPECT_EQ(name(choose("auto", {true, true, true})), "jsrun");
  EXPECT_EQ(choose("auto", {true, false, false}).reason, "inside an LSF job ($LSB_JOBID is set)");
  EXPECT_EQ(name(choose("auto", {false, true, true})), "srun");
  const Choice local = choose("auto", {false, false, true});
  EXPECT_EQ(name(local), "local");
  EXPECT_EQ(local.reason, "every host is this host");
  const Choice ssh = choose("auto", {false, false, false});
  EXPECT_EQ(name(ssh), "ssh");
  EXPECT_EQ(ssh.reason, "some hosts are remote and no batch system was found");
}

TEST(ChooseTest, NamedLauncherIsKept) {
  const Choice c = choose("mpirun", {true, true, true});
  EXPECT_EQ(name(c), "mpirun");
  EXPECT_EQ(c.reason, "asked for with --launcher mpirun");
}

TEST(ChooseTest, PmixIsDdlrunsOwnLauncherWithItsServer) {
  const Choice local = choose("pmix", {true, true, true});
  EXPECT_EQ(name(local), "local");
  EXPECT_EQ(local.reason,
            "asked for with --launcher pmix: ddlrun's own launcher with its PMIx server (local: "
            "every host is this host)");
  const Choice ssh = choose("pmix", {false, false, false});
  EXPECT_EQ(name(ssh), "ssh");
  EXPECT_EQ(ssh.reason,
            "asked for with --launcher pmix: ddlrun's own launcher with its PMIx server (ssh: "
            "some hosts are remote)");
  EXPECT_EQ(name(choose("prterun", {false, false, true})), "prterun");
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
