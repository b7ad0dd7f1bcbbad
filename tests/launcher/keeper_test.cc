// The keeper's start (launcher/keeper.h): a program that is not a keeper is never used.

#include "launcher/keeper.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace ddl::launcher {
namespace {

namespace fs = std::filesystem;

/// A script that records its pid in `pid_file` and then sleeps: what a program that does not
/// know --keeper (a test binary running itself) looks like to ddlrun.
std::string not_a_keeper(const fs::path& dir, const fs::path& pid_file) {
  const fs::path script = dir / "not-a-keeper.sh";
  std::ofstream(script) << "#!/bin/sh\necho $$ >" << pid_file.string() << "\nexec sleep 30\n";
  fs::permissions(script, fs::perms::owner_all);
  return script.string();
}

bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_s, comm, state;
  return static_cast<bool>(stat >> pid_s >> comm >> state) && state != "Z";
}

// A program that does not say hello is killed and no keeper is used: ddlrun_test, whose
// /proc/self/exe ddlrun's code once ran as its keeper, ran its whole suite again instead and
// started keepers of its own without end.
TEST(KeeperTest, AProgramThatDoesNotSayHelloIsKilledAndNotUsedAgain) {
  const fs::path dir = fs::temp_directory_path() / ("keeper-test." + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path pid_file = dir / "pid";
  enable_keeper(not_a_keeper(dir, pid_file));
  const auto start = std::chrono::steady_clock::now();
  keeper_remove_dir((dir / "nothing-here").string());  // the first request starts it
  // The request does not wait for the hello (a launch does not wait for the keeper to load).
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1500));
  // Within the hello's 2 s (and some slack for a loaded machine) it is killed.
  pid_t pid = 0;
  bool killed = false;
  while (!killed && std::chrono::steady_clock::now() - start < std::chrono::seconds(6)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ifstream in(pid_file);
    killed = (pid != 0 || static_cast<bool>(in >> pid)) && !alive(pid);
  }
  ASSERT_NE(pid, 0) << "the program did not run";
  EXPECT_TRUE(killed) << "the program that is not a keeper still runs";
  fs::remove(pid_file);
  keeper_remove_dir((dir / "nothing-here").string());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(fs::exists(pid_file)) << "it was started a second time";
  fs::remove_all(dir);
}

// A process started as a keeper (DDLRUN_KEEPER=1 in its environment) starts none itself.
TEST(KeeperTest, AProcessStartedAsAKeeperStartsNone) {
  const fs::path dir = fs::temp_directory_path() / ("keeper-test2." + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path pid_file = dir / "pid";
  const std::string program = not_a_keeper(dir, pid_file);
  const pid_t child = fork();
  if (child == 0) {  // a process of its own: the keeper's state is per process
    setenv("DDLRUN_KEEPER", "1", 1);
    enable_keeper(program);
    keeper_remove_dir((dir / "nothing-here").string());
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(fs::exists(pid_file)) << "a keeper was started from a keeper";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ddl::launcher
