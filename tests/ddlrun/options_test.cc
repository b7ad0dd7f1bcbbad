#include "ddlrun/options.h"

#include <gtest/gtest.h>

namespace ddl::ddlrun {
namespace {

using Args = std::vector<std::string>;

Options parse(const Args& args) {
  ParsedCommandLine p = parse_command_line(args);
  EXPECT_FALSE(p.exit_code.has_value());
  return p.options;
}

std::string usage_error(const Args& args) {
  try {
    parse_command_line(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "no error";
}

TEST(OptionsTest, ProgramIsTheFirstUnknownArgumentAndPassesThroughUntouched) {
  const Options o = parse({"-H", "a,b", "-v", "python", "train.py", "-v", "--lr", "0.1", "a b",
                           "$HOME", "x;y", "'q'", "--"});
  EXPECT_EQ(o.hosts, (Args{"a,b"}));
  EXPECT_EQ(o.verbosity, 1);
  EXPECT_EQ(o.program,
            (Args{"python", "train.py", "-v", "--lr", "0.1", "a b", "$HOME", "x;y", "'q'", "--"}));
}

TEST(OptionsTest, DoubleDashEndsOptions) {
  const Options o = parse({"-n", "2", "--", "-weird-program", "--dry-run"});
  EXPECT_EQ(o.np, 2);
  EXPECT_FALSE(o.dry_run);
  EXPECT_EQ(o.program, (Args{"-weird-program", "--dry-run"}));
}

TEST(OptionsTest, EveryOption) {
  const Options o = parse({"-H",
                           "a:2",
                           "--hosts=b",
                           "--hostfile",
                           "h.txt",
                           "-n",
                           "4",
                           "-a",
                           "2",
                           "-m",
                           "p:2x2",
                           "--rankfile",
                           "r.txt",
                           "--launcher",
                           "ssh",
                           "--mpiarg",
                           "-mca btl tcp",
                           "-x",
                           "FOO",
                           "-x",
                           "BAR=1 2",
                           "--tcp",
                           "--dry-run",
                           "--output",
                           "json",
                           "--topology-file",
                           "t.yaml",
                           "-vv",
                           "--timeout",
                           "1.5",
                           "prog"});
  EXPECT_EQ(o.hosts, (Args{"a:2", "b"}));
  EXPECT_EQ(o.hostfile, "h.txt");
  EXPECT_EQ(o.np, 4);
  EXPECT_EQ(o.accelerators, 2);
  EXPECT_EQ(o.mode, "p:2x2");
  EXPECT_EQ(o.rankfile, "r.txt");
  EXPECT_EQ(o.launcher, "ssh");
  EXPECT_EQ(o.mpiargs, (Args{"-mca btl tcp"}));
  EXPECT_EQ(o.exports, (Args{"FOO", "BAR=1 2"}));
  EXPECT_TRUE(o.tcp);
  EXPECT_TRUE(o.dry_run);
  EXPECT_EQ(o.output, OutputFormat::kJson);
  EXPECT_EQ(o.topology_file, "t.yaml");
  EXPECT_EQ(o.verbosity, 2);
  EXPECT_EQ(o.timeout, 1.5);
  EXPECT_EQ(o.program, (Args{"prog"}));
}

TEST(OptionsTest, OutputFormats) {
  const auto format = [](const std::string& name) {
    return parse_command_line({"--output", name, "prog"}).options.output;
  };
  EXPECT_EQ(format("text"), OutputFormat::kText);
  EXPECT_EQ(format("yaml"), OutputFormat::kYaml);
  EXPECT_EQ(format("json"), OutputFormat::kJson);
  EXPECT_EQ(format("svg"), OutputFormat::kSvg);
}

TEST(OptionsTest, IbmSpellingsKeepWorking) {
  const Options o = parse({"--H", "h1,h2", "-mode", "p:4x2", "-accelerators", "4", "-mpiarg",
                           "-mca x y", "-rankfile", "rf", "python", "-mode", "keep"});
  EXPECT_EQ(o.hosts, (Args{"h1,h2"}));
  EXPECT_EQ(o.mode, "p:4x2");
  EXPECT_EQ(o.accelerators, 4);
  EXPECT_EQ(o.mpiargs, (Args{"-mca x y"}));
  EXPECT_EQ(o.rankfile, "rf");
  EXPECT_EQ(o.program, (Args{"python", "-mode", "keep"}));  // not rewritten after the program
  EXPECT_EQ(parse({"-rf", "r2", "-np", "3", "-hostfile", "hf", "-mode=r", "p"}).rankfile, "r2");
  EXPECT_EQ(parse({"-np", "3", "p"}).np, 3);
  EXPECT_EQ(parse({"-mode=r:2", "p"}).mode, "r:2");
}

TEST(OptionsTest, ShortOptionForms) {
  const Options o = parse({"-Hnode1", "-n4", "-vvv", "prog"});
  EXPECT_EQ(o.hosts, (Args{"node1"}));
  EXPECT_EQ(o.np, 4);
  EXPECT_EQ(o.verbosity, 3);
  EXPECT_EQ(o.program, (Args{"prog"}));
}

TEST(OptionsTest, HelpAndVersionExitZero) {
  ParsedCommandLine help = parse_command_line({"--help"});
  ASSERT_EQ(help.exit_code, 0);
  EXPECT_NE(help.text.find("Usage: ddlrun [options] [--] program [args...]"), std::string::npos);
  EXPECT_EQ(help.text, help_text());
  ParsedCommandLine version = parse_command_line({"--version"});
  ASSERT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.text.rfind("ddlrun ", 0), 0u);
}

TEST(OptionsTest, OutputDirThatIsAFileIsRefused) {
  EXPECT_EQ(usage_error({"--output-dir", "/etc/hostname", "p"}),
            "--output-dir /etc/hostname: exists and is not a directory; name a directory (ddlrun "
            "creates it when missing)");
}

TEST(OptionsTest, UsageErrors) {
  EXPECT_EQ(usage_error({"--dryrun", "p"}),
            "unknown option '--dryrun' (did you mean '--dry-run'?); see ddlrun --help (to run a "
            "program whose name starts with '-', put -- before it)");
  EXPECT_EQ(usage_error({"--acelerators=4", "p"}),
            "unknown option '--acelerators' (did you mean '--accelerators'?); see ddlrun --help "
            "(to run a program whose name starts with '-', put -- before it)");
  EXPECT_EQ(usage_error({"-Z", "p"}),
            "unknown option '-Z' (did you mean '-h'?); see ddlrun --help (to run a program whose "
            "name starts with '-', put -- before it)");
  EXPECT_EQ(usage_error({"-vZ", "p"}).substr(0, 22), "unknown option '-vZ' (");
  EXPECT_EQ(usage_error({"-H", "a"}),
            "no program to run; usage: ddlrun [options] [--] program [args...]");
  EXPECT_EQ(usage_error({"-H"}), "option -H needs a value");
  EXPECT_EQ(usage_error({"--hostfile"}), "option --hostfile needs a value");
  EXPECT_EQ(usage_error({"-n", "0", "p"}), "--np: '0' is not a whole number of at least 1");
  EXPECT_EQ(usage_error({"-a", "x", "p"}),
            "--accelerators: 'x' is not a whole number of at least 1");
  EXPECT_EQ(usage_error({"--timeout", "-1", "p"}),
            "--timeout: '-1' is not a number of seconds above 0");
  EXPECT_EQ(usage_error({"--launcher", "mpirn", "p"}),
            "--launcher: unknown launcher 'mpirn' (did you mean 'mpirun'?); use one of auto, "
            "local, ssh, mpirun, pmix, prterun, srun, flux, jsrun");
  EXPECT_EQ(usage_error({"--launcher", "mpiexec", "p"}),
            "--launcher: unknown launcher 'mpiexec'; use one of auto, local, ssh, mpirun, pmix, "
            "prterun, srun, flux, jsrun");
  EXPECT_EQ(
      usage_error({"--output", "xml", "p"}),
      "--output: unknown format 'xml' (did you mean 'yaml'?); use one of text, yaml, json, svg");
  EXPECT_EQ(usage_error({"-q", "-v", "p"}), "-q and -v contradict each other; give one");
}

TEST(OptionsTest, HardwareOptions) {
  const Options o = parse({"--host-xml", "*=a.xml", "--host-xml=n1=b.xml", "--ssh-config", "cfg",
                           "--connect-timeout", "2.5", "--job-id", "j9", "prog"});
  EXPECT_EQ(o.host_xml, (Args{"*=a.xml", "n1=b.xml"}));
  EXPECT_EQ(o.ssh_config, "cfg");
  EXPECT_EQ(o.connect_timeout, 2.5);
  EXPECT_EQ(o.job_id, "j9");
  EXPECT_FALSE(o.no_probe);
  EXPECT_TRUE(parse({"--no-probe", "prog"}).no_probe);
  EXPECT_FALSE(o.probe_links);
  EXPECT_TRUE(parse({"--probe-links", "prog"}).probe_links);
  EXPECT_EQ(usage_error({"--probe-links", "--no-probe", "p"}),
            "--probe-links measures between the hosts' NICs, which --no-probe leaves unknown; "
            "give one of them");
  EXPECT_EQ(parse({"--probe-links", "--probe-links-port", "29555", "p"}).probe_links_port, 29555);
  EXPECT_EQ(usage_error({"--probe-links-port", "29555", "p"}),
            "--probe-links-port sets the port of --probe-links' agents; add --probe-links");
  const ParsedCommandLine probe = parse_command_line({"--probe"});
  EXPECT_TRUE(probe.options.probe);
  EXPECT_TRUE(probe.options.program.empty());
  EXPECT_EQ(usage_error({"--probe", "--dry-run"}), "--probe and --dry-run contradict each other");
  EXPECT_EQ(usage_error({"--host-xml", "=a.xml", "p"}),
            "--host-xml =a.xml: expected HOST=FILE (or '*=FILE' for every host)");
  EXPECT_EQ(usage_error({"--connect-timeout", "0", "p"}),
            "--connect-timeout: '0' is not a number of seconds above 0");
}

// --timeout 1e10 used to overflow the milliseconds it became and fire at once ("timed out
// after -9.2e15 s"): every duration option refuses what it cannot represent.
TEST(OptionsTest, DurationsTooLongAreRefused) {
  const std::string too_long =
      "' is more than 1000000000 s (about 31 years), the longest duration ddlrun takes; give a "
      "smaller number";
  EXPECT_EQ(usage_error({"--timeout", "1e10", "p"}), "--timeout: '1e10" + too_long);
  EXPECT_EQ(usage_error({"--timeout", "inf", "p"}), "--timeout: 'inf" + too_long);
  EXPECT_EQ(usage_error({"--kill-grace", "1e300", "p"}), "--kill-grace: '1e300" + too_long);
  EXPECT_EQ(usage_error({"--connect-timeout", "2e9", "p"}), "--connect-timeout: '2e9" + too_long);
  EXPECT_EQ(usage_error({"--timeout", "nan", "p"}),
            "--timeout: 'nan' is not a number of seconds above 0");
  EXPECT_EQ(parse({"--timeout", "1e9", "p"}).timeout, 1e9);
}

// Absurd numbers get texts that say what is wrong: --timeout 1e-9 (not "timed out after 0 s"),
// --max-restarts 99999999999999999999 (not "not a whole number").
TEST(OptionsTest, DurationsTooShortAndCountsTooLargeAreSaidSo) {
  EXPECT_EQ(usage_error({"--timeout", "1e-9", "p"}),
            "--timeout: '1e-9' is less than 0.001 s (1 ms), the shortest duration ddlrun takes");
  EXPECT_EQ(parse({"--timeout", "0.001", "p"}).timeout, 0.001);
  EXPECT_EQ(usage_error({"--max-restarts", "99999999999999999999", "p"}),
            "--max-restarts: '99999999999999999999' is too large: at most 2147483647");
  EXPECT_EQ(usage_error({"-n", "2147483648", "p"}),
            "--np: '2147483648' is too large: at most 2147483647");
}

// The ssh launcher's launch tree, Slurm's TreeWidth by default (ddlrun under 64
// threads); 0 is flat.
TEST(OptionsTest, TreeWidth) {
  EXPECT_EQ(parse({"p"}).tree_width, 50);
  EXPECT_EQ(parse({"--tree-width", "4", "p"}).tree_width, 4);
  EXPECT_EQ(parse({"--fanout", "0", "p"}).tree_width, 0);
  EXPECT_EQ(usage_error({"--tree-width", "-1", "p"}),
            "--tree-width: '-1' is not a whole number of at least 0");
  EXPECT_EQ(usage_error({"--fanout", "x", "p"}),
            "--tree-width: 'x' is not a whole number of at least 0");
}

TEST(OptionsTest, RestartOptions) {
  const Options none = parse({"p"});
  EXPECT_EQ(none.max_restarts, 0);
  EXPECT_FALSE(none.min_hosts.has_value());
  EXPECT_FALSE(none.nnodes.has_value());
  const Options o = parse({"--max-restarts", "3", "--min-hosts", "2", "p"});
  EXPECT_EQ(o.max_restarts, 3);
  EXPECT_EQ(o.min_hosts, 2);
  const Options range = parse({"--nnodes", "2:4", "p"});
  ASSERT_TRUE(range.nnodes.has_value());
  EXPECT_EQ(range.nnodes->min, 2);
  EXPECT_EQ(range.nnodes->max, 4);
  const Options fixed = parse({"--nnodes=3", "p"});
  ASSERT_TRUE(fixed.nnodes.has_value());
  EXPECT_EQ(fixed.nnodes->min, 3);
  EXPECT_EQ(fixed.nnodes->max, 3);
  EXPECT_EQ(parse({"--max-restarts", "0", "p"}).max_restarts, 0);
  EXPECT_EQ(parse({"--max_restarts", "2", "p"}).max_restarts, 2);  // torchrun's spelling
  EXPECT_EQ(parse({"--max_restarts=4", "p"}).max_restarts, 4);
}

TEST(OptionsTest, RestartOptionErrors) {
  EXPECT_EQ(usage_error({"--max-restarts", "-1", "p"}),
            "--max-restarts: '-1' is not a whole number of at least 0");
  EXPECT_EQ(usage_error({"--max-restarts", "x", "p"}),
            "--max-restarts: 'x' is not a whole number of at least 0");
  EXPECT_EQ(usage_error({"--min-hosts", "0", "p"}),
            "--min-hosts: '0' is not a whole number of at least 1");
  EXPECT_EQ(usage_error({"--nnodes", "two", "p"}),
            "--nnodes: 'two' is not N or MIN:MAX (whole numbers of hosts, e.g. 3 or 2:4)");
  EXPECT_EQ(usage_error({"--nnodes", "2:", "p"}),
            "--nnodes: '2:' is not N or MIN:MAX (whole numbers of hosts, e.g. 3 or 2:4)");
  EXPECT_EQ(usage_error({"--nnodes", "0:2", "p"}),
            "--nnodes: '0:2': the number of hosts must be at least 1");
  EXPECT_EQ(usage_error({"--nnodes", "0", "p"}),
            "--nnodes: '0': the number of hosts must be at least 1");
  EXPECT_EQ(usage_error({"--nnodes", "4:2", "p"}),
            "--nnodes: '4:2': MIN 4 is above MAX 2; give MIN:MAX with MIN <= MAX");
  EXPECT_EQ(usage_error({"--min-hosts", "2", "--nnodes", "3:4", "p"}),
            "--min-hosts 2 and --nnodes 3:4 disagree on the fewest hosts; give one of them");
  EXPECT_EQ(usage_error({"--nnodes", "2", "--nnodes", "3", "p"}),
            "--nnodes is given more than once; give it once");
}

TEST(OptionsTest, OptionGivenTwice) {
  EXPECT_EQ(usage_error({"-n", "2", "--np", "3", "p"}),
            "--np is given more than once; give it once");
}

}  // namespace
}  // namespace ddl::ddlrun
