// Where the job's output goes: ddlrun's stdout and stderr, or one file per rank and stream.
//
// How it works: the supervisor must never block on a reader (a `| less` left alone, a `| head`
// that is gone), or signals and --timeout would wait behind it. So the terminal sink hands
// what it formats to a Writer: a bounded queue of byte strings and a thread that writes them
// with blocking write()s, as many as are queued at once (writev). While the queue holds 1 MiB
// or more the sink is not ready() and the supervisor leaves output in its event queue, whose
// producers then stop reading the ranks' pipes: the ranks block, as in a shell pipeline. The
// writer calls the sink's on_change() callback when room appears (below half) and when a
// write fails. One writer serves fds 1 and 2 when they are the same file (a terminal, or
// 2>&1), so their order is kept; two otherwise, so that a stalled stdout does not hold
// ddlrun's messages on stderr. A writer blocked for good in write() is left behind when its
// sink goes (detached; it holds its own state), so ddlrun can still exit.

#include "launcher/output.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>

#include "base/fd.h"

namespace ddl::launcher {

namespace {

constexpr size_t kWriterLimit = size_t{1} << 20;
constexpr size_t kMaxLine = 64 * 1024;
constexpr size_t kTailCut = 300;

using base::write_all;

/// Writes queued bytes to fds on a thread of its own (see the top of the file).
class Writer {
 public:
  Writer() : state_(std::make_shared<State>()) {
    // The thread takes no signal: the supervisor's signal thread reads them.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    thread_ = std::thread([s = state_] { run(*s); });
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }
  ~Writer() {
    bool busy;
    {
      std::lock_guard lock(state_->mutex);
      state_->stop = true;
      busy = state_->writing;
    }
    state_->work.notify_all();
    if (busy) {
      thread_.detach();  // blocked on a reader that does not read: left behind
    } else {
      thread_.join();
    }
  }
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  /// Queues `bytes` for `fd`; `counted`: toward the bound that full() reports. Dropped once a
  /// write to `fd` failed.
  void put(int fd, std::string bytes, bool counted) {
    if (bytes.empty()) return;
    {
      std::lock_guard lock(state_->mutex);
      if (state_->failed.count(fd) != 0) return;
      if (counted) state_->counted += bytes.size();
      state_->queue.push_back({fd, std::move(bytes), counted});
    }
    state_->work.notify_one();
  }
  bool full() {
    std::lock_guard lock(state_->mutex);
    const bool full = state_->counted >= kWriterLimit;
    state_->want_wake = state_->want_wake || full;
    return full;
  }
  bool idle() {
    std::lock_guard lock(state_->mutex);
    const bool idle = state_->queue.empty() && !state_->writing;
    state_->want_wake = state_->want_wake || !idle;
    return idle;
  }
  /// The errno of the first failed write to `fd`, or 0.
  int error(int fd) {
    std::lock_guard lock(state_->mutex);
    auto it = state_->failed.find(fd);
    return it == state_->failed.end() ? 0 : it->second;
  }
  void on_change(std::function<void()> wake) {
    std::lock_guard lock(state_->mutex);
    state_->wake = std::move(wake);
  }
  void flush(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lock(state_->mutex);
    state_->done.wait_until(lock, deadline,
                            [&] { return state_->queue.empty() && !state_->writing; });
  }

 private:
  struct Piece {
    int fd;
    std::string bytes;
    bool counted;
  };
  struct State {
    std::mutex mutex;
    std::condition_variable work;
    std::condition_variable done;
    std::deque<Piece> queue;
    size_t counted = 0;  ///< bytes of counted pieces queued or being written
    bool writing = false;
    bool stop = false;
    bool want_wake = false;
    std::map<int, int> failed;  ///< fd -> errno
    std::function<void()> wake;
  };

  /// Writes `batch` (one fd) with writev; 0 or the errno.
  static int write_batch(std::vector<Piece>& batch) {
    std::vector<iovec> iov;
    for (Piece& p : batch)
      iov.push_back({p.bytes.data(), p.bytes.size()});
    size_t first = 0;
    while (first < iov.size()) {
      const ssize_t n = writev(batch.front().fd, iov.data() + first,
                               static_cast<int>(std::min<size_t>(iov.size() - first, IOV_MAX)));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return n < 0 ? errno : EIO;
      size_t left = static_cast<size_t>(n);
      while (first < iov.size() && left >= iov[first].iov_len)
        left -= iov[first++].iov_len;
      if (first < iov.size()) {
        iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
        iov[first].iov_len -= left;
      }
    }
    return 0;
  }

  static void run(State& s) {
    std::unique_lock lock(s.mutex);
    for (;;) {
      s.work.wait(lock, [&] { return s.stop || !s.queue.empty(); });
      if (s.stop) return;  // what is still queued is abandoned
      std::vector<Piece> batch;
      const int fd = s.queue.front().fd;
      while (!s.queue.empty() && s.queue.front().fd == fd && batch.size() < 256) {
        batch.push_back(std::move(s.queue.front()));
        s.queue.pop_front();
      }
      s.writing = true;
      lock.unlock();
      const int err = write_batch(batch);
      lock.lock();
      s.writing = false;
      for (const Piece& p : batch)
        s.counted -= p.counted ? p.bytes.size() : 0;
      if (err != 0) {
        s.failed.emplace(fd, err);
        std::erase_if(s.queue, [&](const Piece& p) {
          s.counted -= p.fd == fd && p.counted ? p.bytes.size() : 0;
          return p.fd == fd;
        });
      }
      s.done.notify_all();
      if (s.want_wake && (s.counted < kWriterLimit / 2 || err != 0) && s.wake) {
        s.want_wake = false;
        std::function<void()> wake = s.wake;
        lock.unlock();
        wake();
        lock.lock();
      }
    }
  }

  std::shared_ptr<State> state_;
  std::thread thread_;
};

bool same_file(int a, int b) {
  struct stat sa {
  }, sb{};
  return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

std::string tag(TagStyle style, int rank, Stream stream) {
  switch (style) {
    case TagStyle::kTerminal:
      return "[" + std::to_string(rank) + "] ";
    case TagStyle::kOpenMpi:
      return "[1," + std::to_string(rank) + "]<" +
             (stream == Stream::kStdout ? "stdout" : "stderr") + ">:";
    default:
      return "";
  }
}

class TerminalSink : public OutputSink {
 public:
  explicit TerminalSink(TagStyle style) : style_(style) {
    if (style_ == TagStyle::kAuto) style_ = isatty(1) ? TagStyle::kTerminal : TagStyle::kOpenMpi;
    if (!same_file(1, 2)) err_ = std::make_unique<Writer>();
  }
  void output(int rank, Stream stream, std::string_view bytes) override {
    if (rank < 0) {
      put(stream, std::string(bytes));
      return;
    }
    if (style_ == TagStyle::kNone) {
      untagged(rank, stream, bytes);
      return;
    }
    // Whole lines go out with their tag; the rest waits for its newline (or is cut).
    std::string& part = partial_[{rank, stream}];
    const std::string prefix = tag(style_, rank, stream);
    std::string out;
    for (size_t nl; (nl = bytes.find('\n')) != std::string_view::npos;) {
      out += prefix;
      out += part;
      out.append(bytes.substr(0, nl + 1));
      part.clear();
      bytes.remove_prefix(nl + 1);
    }
    part.append(bytes);
    if (part.size() >= kMaxLine) {
      size_t at = 0;
      for (; part.size() - at >= kMaxLine; at += kMaxLine)
        out.append(prefix).append(part, at, kMaxLine).push_back('\n');
      part.erase(0, at);
    }
    put(stream, std::move(out));
  }
  void end(int rank) override {
    for (Stream stream : {Stream::kStdout, Stream::kStderr}) {
      auto it = partial_.find({rank, stream});
      if (it == partial_.end()) continue;
      if (style_ == TagStyle::kNone) {
        put(stream, std::move(it->second));
      } else if (!it->second.empty()) {
        put(stream, tag(style_, rank, stream) + it->second + "\n");
      }
      partial_.erase(it);
    }
  }
  void note(std::string_view text) override {
    writer(Stream::kStderr).put(2, std::string(text) + "\n", false);
  }
  void on_change(std::function<void()> wake) override {
    out_.on_change(wake);
    if (err_) err_->on_change(wake);
  }
  bool ready() override { return !out_.full() && !(err_ && err_->full()); }
  bool written() override {
    const bool out = out_.idle();
    return (err_ ? err_->idle() : true) && out;
  }
  std::optional<OutputFailure> failure() override {
    const int e = out_.error(1);
    if (e == 0) return std::nullopt;
    if (e == EPIPE) return OutputFailure{128 + SIGPIPE, "standard output is closed (EPIPE)"};
    return OutputFailure{1, std::string("cannot write standard output: ") + std::strerror(e)};
  }
  void flush(std::chrono::steady_clock::time_point deadline) override {
    out_.flush(deadline);
    if (err_) err_->flush(deadline);
  }

 private:
  /// Bytes unchanged, but whole lines while they are under 64 KiB, so that ranks that write
  /// a line in pieces (a block-buffered stdout) do not mix their lines.
  void untagged(int rank, Stream stream, std::string_view bytes) {
    std::string& part = partial_[{rank, stream}];
    const size_t nl = bytes.rfind('\n');
    if (nl == std::string_view::npos) {
      part.append(bytes);
      if (part.size() >= kMaxLine) put(stream, std::exchange(part, {}));
      return;
    }
    std::string out = std::exchange(part, {});
    out.append(bytes.substr(0, nl + 1));
    part.assign(bytes.substr(nl + 1));
    put(stream, std::move(out));
  }
  Writer& writer(Stream stream) { return stream == Stream::kStderr && err_ ? *err_ : out_; }
  void put(Stream stream, std::string bytes) {
    writer(stream).put(stream == Stream::kStdout ? 1 : 2, std::move(bytes), true);
  }

  TagStyle style_;
  Writer out_;                   ///< fd 1, and fd 2 when it is the same file
  std::unique_ptr<Writer> err_;  ///< fd 2 when it is another file
  std::map<std::pair<int, Stream>, std::string> partial_;  ///< unfinished lines
};

class DirectorySink : public OutputSink {
 public:
  explicit DirectorySink(std::string dir) : dir_(std::move(dir)) {
    struct stat st {};
    if (mkdir(dir_.c_str(), 0755) != 0 && errno != EEXIST) {
      throw LaunchError("--output-dir " + dir_ + ": cannot create it: " + std::strerror(errno));
    }
    if (stat(dir_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      throw LaunchError("--output-dir " + dir_ +
                        ": exists and is not a directory; name a directory (ddlrun creates it "
                        "when missing)");
    }
  }
  ~DirectorySink() override {
    for (auto& [key, fd] : files_)
      if (fd >= 0) close(fd);
  }
  void output(int rank, Stream stream, std::string_view bytes) override {
    const auto key = std::make_pair(rank, stream);
    auto it = files_.find(key);
    const std::string sub = dir_ + "/" + (rank >= 0 ? "rank." + std::to_string(rank) : "launcher");
    const std::string path = sub + (stream == Stream::kStdout ? "/stdout" : "/stderr");
    if (it == files_.end()) {
      mkdir(sub.c_str(), 0755);
      const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0) fail(path, errno);
      it = files_.emplace(key, fd).first;
    }
    if (it->second < 0) return;
    if (const int e = write_all(it->second, bytes); e != 0) {
      fail(path, e);
      close(it->second);
      it->second = -1;
    }
  }
  void note(std::string_view text) override { err_.put(2, std::string(text) + "\n", false); }
  void on_change(std::function<void()> wake) override { err_.on_change(std::move(wake)); }
  bool written() override { return err_.idle(); }
  std::optional<OutputFailure> failure() override { return failure_; }
  void flush(std::chrono::steady_clock::time_point deadline) override { err_.flush(deadline); }

 private:
  void fail(const std::string& path, int err) {
    if (!failure_) failure_ = OutputFailure{1, "cannot write " + path + ": " + std::strerror(err)};
  }

  std::string dir_;
  std::map<std::pair<int, Stream>, int> files_;
  Writer err_;
  std::optional<OutputFailure> failure_;
};

std::string cut(const std::string& line) {
  return line.size() > kTailCut ? line.substr(0, kTailCut) + "..." : line;
}

}  // namespace

std::unique_ptr<OutputSink> make_terminal_sink(TagStyle style) {
  return std::make_unique<TerminalSink>(style);
}

std::unique_ptr<OutputSink> make_directory_sink(const std::string& dir) {
  return std::make_unique<DirectorySink>(dir);
}

void LastLines::add(int rank, Stream stream, std::string_view bytes) {
  Rank& r = ranks_[rank];
  std::string& part = r.partial[stream == Stream::kStdout ? 0 : 1];
  for (;;) {
    const size_t nl = bytes.find('\n');
    const std::string_view line = bytes.substr(0, nl);
    if (part.size() <= kTailCut) part.append(line.substr(0, kTailCut + 1 - part.size()));
    if (nl == std::string_view::npos) break;
    r.lines.push_back(cut(part));
    part.clear();
    while (static_cast<int>(r.lines.size()) > keep_)
      r.lines.pop_front();
    bytes.remove_prefix(nl + 1);
  }
}

std::vector<std::string> LastLines::of(int rank) const {
  auto it = ranks_.find(rank);
  if (it == ranks_.end()) return {};
  std::vector<std::string> lines(it->second.lines.begin(), it->second.lines.end());
  for (const std::string& part : it->second.partial)
    if (!part.empty()) lines.push_back(cut(part));
  if (static_cast<int>(lines.size()) > keep_) lines.erase(lines.begin(), lines.end() - keep_);
  return lines;
}

}  // namespace ddl::launcher
