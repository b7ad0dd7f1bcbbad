// The man page documents every option --help lists, and --help is what the binary prints.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "ddl_config.h"
#include "ddlrun/options.h"

namespace ddl::ddlrun {
namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string command_output(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0)
    out.append(buf.data(), n);
  pclose(pipe);
  return out;
}

/// Every "-x" / "--xyz" an option line of the help text names.
std::set<std::string> help_options(const std::string& help) {
  std::set<std::string> names;
  const std::regex line_re(R"(^\s+(-[^ ]+.*)$)");
  const std::regex name_re(R"((^|[ ,])(--?[A-Za-z][-A-Za-z]*))");
  std::istringstream in(help);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, line_re)) continue;
    // Only the option column, before the description.
    std::string column = m[1].str().substr(0, m[1].str().find("  "));
    for (std::sregex_iterator it(column.begin(), column.end(), name_re), end; it != end; ++it) {
      names.insert((*it)[2].str());
    }
  }
  return names;
}

/// Every option named in a .TP tag line of the man page (the line after ".TP"), with roff's
/// escapes and font macros removed: "\fB\-H\fR, \fB\-\-hosts\fR" and ".BR \-q , \-\-quiet".
std::set<std::string> man_tagged_options(const std::string& man) {
  std::set<std::string> names;
  const std::regex name_re(R"((^|[ ,"])(--?[A-Za-z][-A-Za-z]*))");
  std::istringstream in(man);
  bool tag_next = false;
  for (std::string line; std::getline(in, line);) {
    if (line == ".TP") {
      tag_next = true;
      continue;
    }
    if (!tag_next) continue;
    tag_next = false;
    std::string plain;
    for (size_t i = 0; i < line.size(); ++i) {
      if (line.compare(i, 2, "\\-") == 0) {
        plain += '-';
        ++i;
      } else if (line.compare(i, 2, "\\f") == 0 && i + 2 < line.size()) {
        i += 2;  // \fB, \fR, \fI
      } else {
        plain += line[i];
      }
    }
    if (plain.rfind(".B", 0) == 0 || plain.rfind(".I", 0) == 0)
      plain = plain.substr(plain.find(' ') + 1);
    for (std::sregex_iterator it(plain.begin(), plain.end(), name_re), end; it != end; ++it) {
      names.insert((*it)[2].str());
    }
  }
  return names;
}

/// "--dry-run" as roff writes it: "\-\-dry\-run".
std::string roff(const std::string& option) {
  std::string s;
  for (char c : option)
    s += c == '-' ? "\\-" : std::string(1, c);
  return s;
}

TEST(HelpManTest, BinaryPrintsTheHelpText) {
  EXPECT_EQ(command_output(std::string(DDLRUN_BINARY) + " --help"), help_text());
}

TEST(HelpManTest, EveryHelpOptionIsInTheManPage) {
  const std::set<std::string> options = help_options(help_text());
  // The help text must list at least the options the foundation issue names.
  for (const char* expected :
       {"-H",         "--hosts",         "--hostfile", "-n",        "--np",
        "-a",         "--accelerators",  "-m",         "--mode",    "--rankfile",
        "--launcher", "--mpiarg",        "-x",         "--tcp",     "--dry-run",
        "--output",   "--topology-file", "-v",         "--verbose", "-q",
        "--quiet",    "--timeout",       "--version",  "-h",        "--help"}) {
    EXPECT_TRUE(options.count(expected)) << expected << " missing from --help";
  }
  const std::string man = read(std::string(DDL_SOURCE_DIR) + "/man/ddlrun.1");
  ASSERT_FALSE(man.empty());
  const std::set<std::string> documented = man_tagged_options(man);
  for (const std::string& option : options) {
    EXPECT_TRUE(documented.count(option))
        << option << " is in --help but has no .TP entry in man/ddlrun.1";
  }
}

TEST(HelpManTest, IbmSpellingsAreInTheManPage) {
  const std::string man = read(std::string(DDL_SOURCE_DIR) + "/man/ddlrun.1");
  for (const char* ibm : {"--H", "-mode", "-accelerators", "-mpiarg", "-rankfile", "-rf", "-nodes",
                          "-racks", "-aisles"}) {
    EXPECT_NE(man.find(roff(ibm)), std::string::npos) << ibm;
  }
}

}  // namespace
}  // namespace ddl::ddlrun
