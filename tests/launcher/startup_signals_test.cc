// The notes of ddlrun's guard before its job starts (launcher/startup_signals.h). The guard
// itself (a signal or --timeout in the first second of a launch) is checked on a real ddlrun
// by tests/ddlrun/startup_signals_test.sh.

#include "launcher/startup_signals.h"

#include <gtest/gtest.h>
#include <signal.h>

namespace ddl::launcher {
namespace {

TEST(StartupSignals, SaysWhichSignalEndedDdlrunBeforeItsJob) {
  EXPECT_EQ(startup_signal_note(SIGINT),
            "ddlrun: got SIGINT while starting the job; leaving now\n");
  EXPECT_EQ(startup_signal_note(SIGHUP),
            "ddlrun: got SIGHUP while starting the job; leaving now\n");
}

TEST(StartupSignals, ATimeoutSaysWhatDdlrunWaitedFor) {
  EXPECT_EQ(startup_timeout_note(5, "probing 3 hosts over ssh (--no-probe or --host-xml skip it)"),
            "ddlrun: the job timed out after 5 s (--timeout) while probing 3 hosts over ssh "
            "(--no-probe or --host-xml skip it), before it started; leaving now\n");
  EXPECT_EQ(startup_timeout_note(0.5, ""),
            "ddlrun: the job timed out after 0.5 s (--timeout) before it started; leaving now\n");
}

}  // namespace
}  // namespace ddl::launcher
