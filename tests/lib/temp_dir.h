#pragma once
// TempDir: a fresh directory under the test's temporary directory, removed at the end. Header-only,
// for the tests that write files a program under test reads (ssh configs, keys, scripts).

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace ddl::testing {

/// A fresh directory under the test's temporary directory, removed at the end.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "ddl_test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + ".XXXXXX")).string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

  /// Writes `text` to the file `name` in it; its path.
  std::string write(const std::string& name, const std::string& text) const {
    const std::string p = path_ + "/" + name;
    std::ofstream(p) << text;
    return p;
  }

 private:
  std::string path_;
};

}  // namespace ddl::testing
