#include "attn/io/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <utility>

#include "attn/error.hpp"
#include "attn/io/text.hpp"

namespace attn {

InputFile::InputFile(InputFile&& o) noexcept
    : fd(std::exchange(o.fd, -1)), size(o.size), source(std::move(o.source)) {}

InputFile::~InputFile() {
  if (fd >= 0) ::close(fd);
}

const char* file_kind(unsigned mode) {
  switch (mode & S_IFMT) {
    case S_IFREG:
      return "a regular file";
    case S_IFDIR:
      return "a directory";
    case S_IFIFO:
      return "a FIFO";
    case S_IFCHR:
      return "a character device";
    case S_IFBLK:
      return "a block device";
    case S_IFSOCK:
      return "a socket";
    default:
      return "not a regular file";
  }
}

InputFile open_regular(const std::filesystem::path& path, const char* what) {
  if (path.empty()) throw InputError(std::string("the ") + what + " path is empty");
  InputFile f;
  f.source = escape(path.string());
  // O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting for one.
  f.fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (f.fd < 0)
    throw InputError(f.source + ": cannot open the " + what + " file: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0)
    throw InputError(f.source + ": cannot stat the " + what + " file: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    throw InputError(f.source + ": the " + what + " file is " + file_kind(st.st_mode) +
                     ", not a regular file");
  f.size = std::uint64_t(st.st_size);
  return f;
}

std::string read_small_file(const std::filesystem::path& path, const char* what,
                            std::uint64_t max_bytes) {
  const InputFile f = open_regular(path, what);
  if (f.size > max_bytes)
    throw InputError(f.source + ": the " + what + " file is " + std::to_string(f.size) +
                     " bytes, over the limit of " + std::to_string(max_bytes));
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(f.fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0)
      throw InputError(f.source + ": cannot read the " + what + " file: " + std::strerror(errno));
    if (n == 0) break;
    text.append(buf, std::size_t(n));
    if (text.size() > max_bytes)  // grew while being read
      throw InputError(f.source + ": the " + what + " file is over the limit of " +
                       std::to_string(max_bytes) + " bytes");
  }
  return text;
}

}  // namespace attn
