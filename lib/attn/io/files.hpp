#pragma once
// Opening the files a run reads: regular files only, opened without blocking, so a FIFO, a
// device (/dev/zero, a tty) or a directory is refused at once (exit 2) instead of hanging the
// run or reading forever.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace attn {

// An open descriptor of a regular file; closes on destruction.
struct InputFile {
  int fd = -1;
  std::uint64_t size = 0;
  std::string source;  // the path, escaped for messages

  InputFile() = default;
  InputFile(InputFile&& o) noexcept;
  InputFile& operator=(InputFile&&) = delete;
  InputFile(const InputFile&) = delete;
  ~InputFile();
};

// Opens `path` read-only with O_NONBLOCK and checks with fstat that it is a regular file.
// `what` names its role in messages ("config", "weights"). Throws InputError: an empty path,
// a file that does not exist or cannot be read, anything but a regular file.
InputFile open_regular(const std::filesystem::path& path, const char* what);

// A whole regular file mapped read-only and never copied, watched so that a front's SIGBUS
// handler can name the file when it shrank under the run (signals.hpp). Unmapped when the last
// owner lets go.
struct MappedFile {
  std::string source;                   // the path, escaped for messages
  std::span<const std::uint8_t> bytes;  // empty for an empty file (nothing mapped)

  MappedFile() = default;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();
};

// Opens `path` as open_regular does and maps all of it. Throws InputError.
std::shared_ptr<const MappedFile> map_file(const std::filesystem::path& path, const char* what);
// The same for a file open already: its descriptor is not opened again.
std::shared_ptr<const MappedFile> map_file(const InputFile& in, const char* what);

// Up to `max_bytes` of the file's first bytes and its size, read with pread (nothing mapped):
// enough to tell formats apart. Throws InputError as open_regular does.
struct FileHead {
  std::string source;  // the path, escaped for messages
  std::uint64_t size = 0;
  std::vector<std::uint8_t> bytes;
};
FileHead read_head(const std::filesystem::path& path, const char* what, std::uint64_t max_bytes);
FileHead read_head(const InputFile& in, const char* what, std::uint64_t max_bytes);

// The whole file, refused (InputError) above max_bytes.
std::string read_small_file(const std::filesystem::path& path, const char* what,
                            std::uint64_t max_bytes);
// The same from a file open already, read from its start.
std::string read_small_file(const InputFile& f, const char* what, std::uint64_t max_bytes);

// What a stat mode is, for messages: "a FIFO", "a directory", "a character device", ...
const char* file_kind(unsigned mode);

}  // namespace attn
