#pragma once
// Every file the tool writes (the dump, the heatmap PNG, anything later) goes through here, so
// each follows the same rules: a device, FIFO or directory is refused before any work; a symlink
// is written through to its target; an existing file keeps its mode; the data goes to a
// temporary file beside the target, with a short name that fits NAME_MAX whatever the target's,
// removed on every error path (and by a front's signal handler through remove_temp_files,
// signals.hpp); it is renamed into place only by commit(), which the caller makes after
// everything else the run had to do has succeeded.
#include <cstddef>
#include <filesystem>
#include <string>

namespace attn {

// Where an output file goes: through a symlink, its target; an existing file keeps its mode.
struct OutputTarget {
  std::filesystem::path path;  // the file to replace or create (symlinks resolved)
  std::filesystem::path dir;   // its directory, where the temporary file is made
  int mode = -1;               // an existing file's permissions; -1: new (0666 & ~umask)
};

// Accepts an existing regular file, or a new name of at most NAME_MAX bytes in an existing
// writable directory. Throws InputError (exit 2) for anything else: an empty path, a directory,
// a FIFO, a device, a missing or unwritable directory, an over-long name. `what` names the
// output in messages ("dump", "PNG").
OutputTarget resolve_output(const std::filesystem::path& path, const char* what);

// resolve_output, then creates and removes a temporary file beside the target: an output that
// cannot be written is refused before the work it would hold.
void check_output(const std::filesystem::path& path, const char* what);

// A file being written. Nothing is visible at the target until commit(); destroyed uncommitted
// (an exception, an early return), the temporary file is removed. Writing past a file-size limit
// is an error, not a kill, where the program ignores SIGXFSZ (attn-cli and Python do). Write
// errors throw std::runtime_error (exit 1).
class OutputFile {
 public:
  OutputFile(const std::filesystem::path& path, const char* what);
  OutputFile(OutputFile&& o) noexcept;
  OutputFile& operator=(OutputFile&&) = delete;
  OutputFile(const OutputFile&) = delete;
  ~OutputFile();

  void write(const void* data, std::size_t n);
  // Synced and closed, then renamed over the target.
  void commit();

  const std::filesystem::path& target() const { return out_.path; }

 private:
  [[noreturn]] void fail(const std::string& why) const;

  OutputTarget out_;
  std::string what_, source_;  // the role and the path as given (escaped), for messages
  std::string temp_;           // the temporary file's path; empty once committed
  int fd_ = -1;
};

}  // namespace attn
