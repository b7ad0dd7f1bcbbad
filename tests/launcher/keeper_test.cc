// The keeper's start (launcher/keeper.h): a program that is not a keeper is never used.

#include "launcher/keeper.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
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

/// A fake keeper program at `path` (a test double of ddlrun-keeper and of `ddlrun --keeper`):
/// records its arguments in `record`, says hello, and appends the requests it reads until EOF.
void fake_keeper(const fs::path& path, const fs::path& record) {
  std::ofstream(path) << "#!/bin/sh\ntrap '' PIPE\necho \"$(basename \"$0\") $*\" >"
                      << record.string() << "\nprintf K >&0\ncat >>" << record.string() << "\n";
  fs::permissions(path, fs::perms::owner_all);
}

/// What `record` holds once it has a second line (the first request), waiting up to 5 s.
std::string wait_for_requests(const fs::path& record) {
  std::string all;
  for (int i = 0; i < 100; ++i) {
    std::ifstream in(record);
    all.assign(std::istreambuf_iterator<char>(in), {});
    if (std::count(all.begin(), all.end(), '\n') >= 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return all;
}

/// In a process of its own (the keeper's state is per process): arms the keeper with
/// `program`, makes one request, and ends.
void request_once_from(const fs::path& program, const fs::path& dir) {
  const pid_t child = fork();
  if (child == 0) {
    enable_keeper(program.string());
    keeper_remove_dir((dir / "job").string());
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

// (First in this file: the keeper's state is per process, and the test below leaves it
// failed for the rest of a run of the whole file.)
// ddlrun-keeper beside ddlrun is started instead of `ddlrun --keeper` (it loads no library of
// ddlrun's); without it, ddlrun itself.
TEST(KeeperTest, ItsOwnProgramBesideDdlrunIsStartedElseDdlrunItself) {
  const fs::path dir = fs::temp_directory_path() / ("keeper-test3." + std::to_string(getpid()));
  fs::create_directories(dir);
  fake_keeper(dir / "ddlrun", dir / "ran-ddlrun");
  fake_keeper(dir / "ddlrun-keeper", dir / "ran-keeper");
  request_once_from(dir / "ddlrun", dir);
  EXPECT_EQ(wait_for_requests(dir / "ran-keeper"),
            "ddlrun-keeper \nd " + (dir / "job").string() + "\n");
  EXPECT_FALSE(fs::exists(dir / "ran-ddlrun"));

  fs::remove(dir / "ddlrun-keeper");
  request_once_from(dir / "ddlrun", dir);
  EXPECT_EQ(wait_for_requests(dir / "ran-ddlrun"),
            "ddlrun --keeper\nd " + (dir / "job").string() + "\n");
  fs::remove_all(dir);
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

// The keeper's own program, given its requests by a parent that is gone before it says hello
// (ddlrun killed as it started it), still carries them out: its hello raised SIGPIPE first.
TEST(KeeperTest, AKeeperWhoseParentDiedBeforeItsHelloStillCleansUp) {
  const fs::path dir = fs::temp_directory_path() / ("keeper-test4." + std::to_string(getpid()));
  fs::create_directories(dir / "job");
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  const std::string request = "d " + (dir / "job").string() + "\n";
  ASSERT_EQ(write(fds[0], request.data(), request.size()), static_cast<ssize_t>(request.size()));
  close(fds[0]);  // the parent is gone
  const std::string keeper = (fs::path(DDLRUN_BINARY).parent_path() / "ddlrun-keeper").string();
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 0);
    execl(keeper.c_str(), keeper.c_str(), nullptr);
    _exit(127);
  }
  close(fds[1]);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  EXPECT_FALSE(fs::exists(dir / "job"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ddl::launcher
