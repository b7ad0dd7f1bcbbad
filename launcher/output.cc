// Where the job's output goes: ddlrun's stdout and stderr, or one file per rank and stream.

#include "launcher/output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

namespace ddl::launcher {

namespace {

void write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text.remove_prefix(static_cast<size_t>(n));
  }
}

class TerminalSink : public OutputSink {
 public:
  explicit TerminalSink(TagStyle style) : style_(style) {
    if (style_ == TagStyle::kAuto) style_ = isatty(1) ? TagStyle::kTerminal : TagStyle::kOpenMpi;
  }
  void line(int rank, Stream stream, std::string_view text) override {
    std::string out;
    if (rank >= 0) {
      switch (style_) {
        case TagStyle::kTerminal:
          out = "[" + std::to_string(rank) + "] ";
          break;
        case TagStyle::kOpenMpi:
          out = "[1," + std::to_string(rank) + "]<" +
                (stream == Stream::kStdout ? "stdout" : "stderr") + ">:";
          break;
        default:
          break;
      }
    }
    out.append(text);
    out.push_back('\n');
    write_all(stream == Stream::kStdout ? 1 : 2, out);
  }
  void note(std::string_view text) override {
    std::string out(text);
    out.push_back('\n');
    write_all(2, out);
  }

 private:
  TagStyle style_;
};

class DirectorySink : public OutputSink {
 public:
  explicit DirectorySink(std::string dir) : dir_(std::move(dir)) {
    if (mkdir(dir_.c_str(), 0755) != 0 && errno != EEXIST) {
      throw LaunchError("--output-dir " + dir_ + ": cannot create it: " + std::strerror(errno));
    }
  }
  ~DirectorySink() override {
    for (auto& [key, fd] : files_)
      close(fd);
  }
  void line(int rank, Stream stream, std::string_view text) override {
    const auto key = std::make_pair(rank, stream);
    auto it = files_.find(key);
    if (it == files_.end()) {
      const std::string sub =
          dir_ + "/" + (rank >= 0 ? "rank." + std::to_string(rank) : "launcher");
      mkdir(sub.c_str(), 0755);
      const std::string path = sub + (stream == Stream::kStdout ? "/stdout" : "/stderr");
      const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0) {
        note("ddlrun: warning: cannot write " + path + ": " + std::strerror(errno));
      }
      it = files_.emplace(key, fd).first;
    }
    if (it->second < 0) return;
    std::string out(text);
    out.push_back('\n');
    write_all(it->second, out);
  }
  void note(std::string_view text) override {
    std::string out(text);
    out.push_back('\n');
    write_all(2, out);
  }

 private:
  std::string dir_;
  std::map<std::pair<int, Stream>, int> files_;
};

}  // namespace

std::unique_ptr<OutputSink> make_terminal_sink(TagStyle style) {
  return std::make_unique<TerminalSink>(style);
}

std::unique_ptr<OutputSink> make_directory_sink(const std::string& dir) {
  return std::make_unique<DirectorySink>(dir);
}

}  // namespace ddl::launcher
