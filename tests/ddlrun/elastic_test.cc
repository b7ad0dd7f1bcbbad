// The restart decisions of run_with_restarts(), against a recording fake runner (no job is
// started): when the job starts again, on which hosts, and what the user is told.

#include "ddlrun/run/elastic.h"

#include <gtest/gtest.h>

#include <csignal>
#include <deque>

#include "mapper/mapper.h"

namespace ddl::ddlrun {
namespace {

using Names = std::vector<std::string>;

/// Plans from a fixed host list minus what the replan leaves out (and the hosts that "do not
/// answer"); runs return the scripted ends, then success.
class FakeRunner : public JobRunner {
 public:
  explicit FakeRunner(Names hosts) : hosts_(std::move(hosts)) {}

  JobPlan plan(const Replan& replan) override {
    replans.push_back(replan);
    if (plan_error) throw UsageError(*plan_error);
    std::set<std::string> without = replan.without;
    std::vector<std::pair<std::string, std::string>> unreachable;
    for (const std::string& h : silent) {
      if (without.insert(h).second) unreachable.emplace_back(h, "connection refused");
    }
    JobPlan p = make(hosts_, without);
    p.unreachable = std::move(unreachable);
    return p;
  }

  launcher::JobEnd run(const JobPlan& plan, int restart) override {
    runs.push_back({host_names(plan), restart});
    if (restart > 0 && start_error) throw launcher::LaunchError(*start_error, 127);
    if (restart > 0 && !lost_at_start.empty()) {
      const std::string host = lost_at_start.front();
      lost_at_start.pop_front();
      throw launcher::LaunchError(
          "cannot start the job on 1 of 3 hosts:\n  " + host + ": no heartbeat for 10 s", 1, {host},
          host + ": no heartbeat for 10 s");
    }
    if (ends.empty()) return {};
    launcher::JobEnd e = ends.front();
    ends.pop_front();
    return e;
  }

  void note(const std::string& text) override { notes.push_back(text); }
  void between_attempts(int restart, const std::string& why, const Names& restarts) override {
    between.push_back(std::to_string(restart) + ": " + why + " (" +
                      std::to_string(restarts.size()) + " so far)");
  }

  /// A plan on `hosts` without `without`, 2 ranks per host.
  static JobPlan make(const Names& hosts, const std::set<std::string>& without) {
    JobPlan p;
    for (const std::string& h : hosts) {
      if (without.contains(h)) continue;
      p.hosts.add(hostfiles::Host{h, 2, std::nullopt, false, hostfiles::SourceKind::kDefault, "-H"},
                  hostfiles::Position{"-H", 0, 0, {}});
    }
    p.placement.ranks = 2 * static_cast<int>(p.hosts.size());
    return p;
  }

  static Names host_names(const JobPlan& p) {
    Names n;
    for (const hostfiles::Host& h : p.hosts.hosts())
      n.push_back(h.name);
    return n;
  }

  struct Run {
    Names hosts;
    int restart;
  };
  std::deque<launcher::JobEnd> ends;
  std::vector<Run> runs;
  std::vector<Replan> replans;
  Names notes;
  Names silent;  ///< hosts whose probe fails
  std::optional<std::string> plan_error;
  std::optional<std::string> start_error;  ///< thrown by every run after the first
  std::deque<std::string> lost_at_start;   ///< a host each restart loses as it starts
  Names between;                           ///< between_attempts() calls

 private:
  Names hosts_;
};

launcher::JobEnd rank_failed(int rank, const std::string& host, int status) {
  launcher::JobEnd e;
  e.status = status;
  e.failed = true;
  e.rank = rank;
  e.host = host;
  e.reason = "rank " + std::to_string(rank) + " (" + host + ") exited with status " +
             std::to_string(status);
  return e;
}

launcher::JobEnd host_lost(const std::string& host) {
  launcher::JobEnd e;
  e.status = 1;
  e.failed = true;
  e.host = host;
  e.reason = host + ": the connection to its agent closed";
  e.lost_hosts = {host};
  return e;
}

RestartLimits limits(int max_restarts, std::optional<int> min_hosts = {},
                     std::optional<int> max_hosts = {}) {
  return RestartLimits{max_restarts, min_hosts, max_hosts};
}

const Names kThree = {"n1", "n2", "n3"};

TEST(ElasticTest, NoRestartsIsTodaysBehaviour) {
  FakeRunner r(kThree);
  r.ends = {rank_failed(3, "n2", 7)};
  EXPECT_EQ(run_with_restarts(FakeRunner::make(kThree, {}), limits(0), r), 7);
  EXPECT_EQ(r.runs.size(), 1u);
  EXPECT_TRUE(r.replans.empty());
  EXPECT_TRUE(r.notes.empty());
}

TEST(ElasticTest, ARankFailureRestartsOnTheSameHosts) {
  FakeRunner r(kThree);
  r.ends = {rank_failed(3, "n2", 7)};
  EXPECT_EQ(run_with_restarts(FakeRunner::make(kThree, {}), limits(2), r), 0);
  ASSERT_EQ(r.runs.size(), 2u);
  EXPECT_EQ(r.runs[1].restart, 1);
  EXPECT_EQ(r.runs[1].hosts, kThree);
  ASSERT_EQ(r.replans.size(), 1u);
  EXPECT_TRUE(r.replans[0].without.empty());
  EXPECT_TRUE(r.replans[0].drop_unreachable);
  EXPECT_EQ(r.replans[0].first_hosts, 3);
  EXPECT_EQ(r.notes,
            (Names{"ddlrun: restart 1 of 2 after rank 3 (n2) exited with status 7; 6 ranks on 3 "
                   "hosts",
                   "ddlrun: the job was restarted 1 time and ended with status 0:",
                   "  1. after rank 3 (n2) exited with status 7; 6 ranks on 3 hosts"}));
}

TEST(ElasticTest, ALostHostEndsTheJobWhenEveryHostIsNeeded) {
  FakeRunner r(kThree);
  r.ends = {host_lost("n3")};
  EXPECT_EQ(run_with_restarts(FakeRunner::make(kThree, {}), limits(1), r), 1);
  EXPECT_EQ(r.runs.size(), 1u);
  EXPECT_EQ(r.notes, (Names{"ddlrun: not restarting the job: only 2 of its 3 hosts remain, fewer "
                            "than the 3 it needs (--min-hosts; default: all of them); it ends "
                            "with status 1"}));
}

TEST(ElasticTest, ALostHostIsLeftOut) {
  FakeRunner r(kThree);
  r.ends = {host_lost("n3")};
  EXPECT_EQ(run_with_restarts(FakeRunner::make(kThree, {}), limits(1, 2), r), 0);
  ASSERT_EQ(r.runs.size(), 2u);
  EXPECT_EQ(r.runs[1].hosts, (Names{"n1", "n2"}));
  EXPECT_EQ(r.replans[0].without, (std::set<std::string>{"n3"}));
  EXPECT_EQ(r.notes.at(0),
            "ddlrun: restart 1 of 1 after n3: the connection to its agent closed (status 1); 4 "
            "ranks on 2 hosts without n3");
}

TEST(ElasticTest, WhenRestartsRunOutTheLastFailuresStatusIsTheJobs) {
  FakeRunner r(kThree);
  r.ends = {rank_failed(0, "n1", 3), rank_failed(1, "n1", 4), rank_failed(2, "n2", 5)};
  EXPECT_EQ(run_with_restarts(FakeRunner::make(kThree, {}), limits(2), r), 5);
  EXPECT_EQ(r.runs.size(), 3u);
  EXPECT_EQ(r.notes.at(2),
            "ddlrun: not restarting the job: no restart left (--max-restarts 2); it ends with "
            "status 5");
  EXPECT_EQ(r.notes.at(3), "ddlrun: the job was restarted 2 times and ended with status 5:");
  EXPECT_EQ(r.notes.at(5), "  2. after rank 1 (n1) exited with status 4; 6 ranks on 3 hosts");
}

TEST(ElasticTest, AHostThatDoesNotAnswerIsLeftOutAndCounted) {
  FakeRunner r(kThree);
  r.ends = {rank_failed(0, "n1", 3), rank_failed(0, "n1", 3)};
  r.silent = {"n2"};
  EXPECT_EQ(run_with_restarts(FakeRunner::make(kThree, {}), limits(3, 2), r), 0);
  ASSERT_EQ(r.runs.size(), 3u);
  EXPECT_EQ(r.runs[1].hosts, (Names{"n1", "n3"}));
  EXPECT_EQ(r.notes.at(0), "ddlrun: n2 does not answer (connection refused); left out");
  // Left out once, it stays out (no --nnodes MAX to let it rejoin).
  EXPECT_EQ(r.replans[1].without, (std::set<std::string>{"n2"}));

  FakeRunner strict(kThree);
  strict.ends = {rank_failed(0, "n1", 3)};
  strict.silent = {"n2"};
  EXPECT_EQ(run_with_restarts(FakeRunner::make(kThree, {}), limits(3), strict), 3);
  EXPECT_EQ(strict.notes.back(),
            "ddlrun: not restarting the job: only 2 of its 3 hosts remain, fewer than the 3 it "
            "needs (--min-hosts; default: all of them); it ends with status 3");
}

TEST(ElasticTest, ALostHostRejoinsBelowTheMaximum) {
  FakeRunner r(kThree);
  r.ends = {host_lost("n3"), rank_failed(0, "n1", 3)};
  EXPECT_EQ(run_with_restarts(FakeRunner::make(kThree, {}), limits(2, 2, 3), r), 0);
  ASSERT_EQ(r.runs.size(), 3u);
  EXPECT_EQ(r.runs[1].hosts, (Names{"n1", "n2"}));
  EXPECT_EQ(r.runs[2].hosts, kThree);
  EXPECT_TRUE(r.replans[1].without.empty());
  // Without room below the maximum it stays out.
  EXPECT_EQ(next_replan(kThree, {"n1", "n2"}, {}, limits(2, 2, 2)).without,
            (std::set<std::string>{"n3"}));
  EXPECT_EQ(next_replan(kThree, {"n1", "n2"}, {}, limits(2, 2)).without,
            (std::set<std::string>{"n3"}));
}

TEST(ElasticTest, OnlyFailuresOfTheJobsOwnRestart) {
  FakeRunner r(kThree);
  launcher::JobEnd timeout;
  timeout.status = 124;
  r.ends = {timeout};
  EXPECT_EQ(run_with_restarts(FakeRunner::make(kThree, {}), limits(2), r), 124);
  EXPECT_EQ(r.runs.size(), 1u);
  EXPECT_TRUE(r.notes.empty());
}

TEST(ElasticTest, APlanThatFailsEndsTheJob) {
  FakeRunner r(kThree);
  r.ends = {rank_failed(0, "n1", 3)};
  r.plan_error = "no hosts";
  EXPECT_EQ(run_with_restarts(FakeRunner::make(kThree, {}), limits(2), r), 3);
  EXPECT_EQ(
      r.notes.at(0),
      "ddlrun: not restarting the job: cannot plan it again: no hosts; it ends with status 3");
}

TEST(ElasticTest, ARestartThatCannotStartEndsTheJobWithItsStatus) {
  FakeRunner r(kThree);
  r.ends = {rank_failed(0, "n1", 3)};
  r.start_error = "n2: ./train: not found";
  EXPECT_EQ(run_with_restarts(FakeRunner::make(kThree, {}), limits(2), r), 127);
  EXPECT_EQ(r.notes.at(1), "ddlrun: error: restart 1 cannot start: n2: ./train: not found");
  EXPECT_EQ(r.notes.at(2), "ddlrun: the job was restarted 1 time and ended with status 127:");
}

// A host that fails while a restart starts is one more lost host; the job
// goes on without it while --min-hosts allows.
TEST(ElasticTest, AHostLostWhileARestartStartsIsOneMoreLostHost) {
  FakeRunner r(kThree);
  r.ends = {host_lost("n3")};
  r.lost_at_start = {"n2"};
  EXPECT_EQ(run_with_restarts(FakeRunner::make(kThree, {}), limits(3, 1), r), 0);
  ASSERT_EQ(r.runs.size(), 3u);
  EXPECT_EQ(r.runs[2].hosts, Names{"n1"});
  EXPECT_EQ(r.notes, (Names{"ddlrun: restart 1 of 3 after n3: the connection to its agent closed "
                            "(status 1); 4 ranks on 2 hosts without n3",
                            "ddlrun: restart 1 could not start: n2: no heartbeat for 10 s",
                            "ddlrun: restart 2 of 3 after restart 1 could not start: n2: no "
                            "heartbeat for 10 s (status 1); 2 ranks on 1 host without n2, n3",
                            "ddlrun: the job was restarted 2 times and ended with status 0:",
                            "  1. after n3: the connection to its agent closed (status 1); 4 ranks "
                            "on 2 hosts without n3",
                            "  2. after restart 1 could not start: n2: no heartbeat for 10 s "
                            "(status 1); 2 ranks on 1 host without n2, n3"}));
  EXPECT_EQ(r.between,
            (Names{"1: n3: the connection to its agent closed (0 so far)",
                   "2: restart 1 could not start: n2: no heartbeat for 10 s (1 so far)"}));
}

// A signal that came while a failed attempt was being stopped ends the job
// with 128+N: no restart, the summary of those before.
TEST(ElasticTest, ASignalWhileAFailureIsStoppedEndsTheJob) {
  FakeRunner r(kThree);
  launcher::JobEnd interrupted = rank_failed(0, "n1", 3);
  interrupted.failed = false;  // as supervise() says it
  interrupted.signal = SIGTERM;
  r.ends = {rank_failed(1, "n2", 3), interrupted};
  EXPECT_EQ(run_with_restarts(FakeRunner::make(kThree, {}), limits(3), r), 143);
  EXPECT_EQ(r.runs.size(), 2u);
  EXPECT_EQ(r.notes.back(), "  1. after rank 1 (n2) exited with status 3; 6 ranks on 3 hosts");
  EXPECT_EQ(r.notes.at(1), "ddlrun: the job was restarted 1 time and ended with status 143:");
}

TEST(ElasticTest, RestartsPauseLongerAndLonger) {
  EXPECT_EQ(restart_pause(1).count(), 0);
  EXPECT_EQ(restart_pause(2).count(), 250);
  EXPECT_EQ(restart_pause(3).count(), 500);
  EXPECT_EQ(restart_pause(7).count(), 8000);
  EXPECT_EQ(restart_pause(1000000).count(), 8000);
  EXPECT_EQ(between_attempts_note(SIGINT, 0, 2, "rank 1 (n2) exited with status 3"),
            "ddlrun: got SIGINT while restart 2 was being prepared (after rank 1 (n2) exited "
            "with status 3); leaving now");
  EXPECT_EQ(between_attempts_note(0, 8, 1, "n3: no heartbeat for 10 s"),
            "ddlrun: the job timed out after 8 s (--timeout) while restart 1 was being prepared "
            "(after n3: no heartbeat for 10 s); leaving now");
}

TEST(ElasticTest, TheFirstPlanMustFitTheLimits) {
  FakeRunner r(kThree);
  try {
    run_with_restarts(FakeRunner::make(kThree, {}), limits(1, 4), r);
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(),
                 "the job has 3 hosts, fewer than the 4 that --min-hosts or --nnodes ask for; add "
                 "hosts or ask for fewer");
  }
  try {
    run_with_restarts(FakeRunner::make(kThree, {}), limits(1, 1, 2), r);
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(),
                 "the job has 3 hosts, more than the 2 that --nnodes allows; list fewer hosts or "
                 "raise MAX");
  }
  EXPECT_TRUE(r.runs.empty());
}

std::optional<std::string> no_env(const char*, void*) {
  return std::nullopt;
}

// make_plan's part of a restart: the hosts left out, a host whose probe fails dropped (not an
// error), -n scaled with the hosts.
TEST(ElasticTest, ReplanLeavesHostsOut) {
  Options o;
  o.hosts = {"n1:2,n2:2,n3:2"};
  o.np = 6;
  o.dry_run = true;
  o.program = {"p"};
  Names asked;
  const RemoteProbe remote = [&asked](const Names& hosts) {
    std::vector<mapper::HostProbe> out;
    for (const std::string& h : hosts) {
      asked.push_back(h);
      mapper::HostProbe p;
      p.host = h;
      if (h == "n3") {
        p.error = "connection refused (fake)";
      } else {
        mapper::ProbeOptions po;
        po.xml_path = std::string(DDL_TEST_DATA_DIR) + "/topologies/laptop-1p4c8t.xml";
        p.inventory = mapper::probe_hwloc(po);
      }
      out.push_back(std::move(p));
    }
    return out;
  };
  Replan replan;
  replan.without = {"n2"};
  replan.drop_unreachable = true;
  replan.first_hosts = 3;
  const JobPlan plan = make_plan(o, no_env, nullptr, remote, replan);
  EXPECT_EQ(asked, (Names{"n1", "n3"}));
  EXPECT_EQ(FakeRunner::host_names(plan), (Names{"n1"}));
  EXPECT_EQ(
      plan.unreachable,
      (std::vector<std::pair<std::string, std::string>>{{"n3", "connection refused (fake)"}}));
  EXPECT_EQ(plan.placement.ranks, 2);
  EXPECT_THROW(make_plan(o, no_env, nullptr, remote), mapper::ProbeError);  // a first plan
}

TEST(ElasticTest, LimitsFromTheOptions) {
  Options o;
  o.max_restarts = 2;
  o.min_hosts = 2;
  RestartLimits l = restart_limits(o);
  EXPECT_EQ(l.max_restarts, 2);
  EXPECT_EQ(l.min_hosts, 2);
  EXPECT_FALSE(l.max_hosts.has_value());
  o.min_hosts.reset();
  o.nnodes = NodeRange{1, 3};
  l = restart_limits(o);
  EXPECT_EQ(l.min_hosts, 1);
  EXPECT_EQ(l.max_hosts, 3);
}

}  // namespace
}  // namespace ddl::ddlrun
