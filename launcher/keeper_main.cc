// ddlrun-keeper: the keeper (keeper.h) as a program of its own, which ddlrun and its agents
// start instead of `ddlrun --keeper` when it lies beside them. It loads libc only (libstdc++
// is linked in): one starts on every host of a job, and ddlrun's own libraries took longer to
// load than the keeper's whole work.

#include <unistd.h>

#include <cstdio>

#include "launcher/keeper.h"

int main(int argc, char**) {
  if (argc > 1 || isatty(0)) {
    std::fputs(
        "ddlrun-keeper: ddlrun starts this program itself, to clean up after it and its agents "
        "(man ddlrun: When ddlrun is killed); it takes no arguments and is not run by hand\n",
        stderr);
    return 2;
  }
  ddl::launcher::run_keeper(0);
}
