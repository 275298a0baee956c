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

namespace attn {

OutputTarget resolve_output(const std::filesystem::path& path, const char* what) {
  namespace fs = std::filesystem;
  const std::string source = escape(path.string());
  auto fail = [&](const std::string& why) -> InputError {
    return InputError(source + ": cannot write the " + what + ": " + why);
  };
  if (path.empty()) throw InputError(std::string("the ") + what + " path is empty");
  if (path.string().size() >= PATH_MAX)
    throw fail("the path is " + std::to_string(path.string().size()) + " bytes, over PATH_MAX");
  OutputTarget t;
  std::error_code ec;
  t.path = fs::weakly_canonical(fs::absolute(path), ec);  // through symlinks to the file
  if (ec) t.path = fs::absolute(path);
  const std::string name = t.path.filename().string();
  if (name.empty() || name == "." || name == "..") throw fail("it names a directory");
  if (name.size() > NAME_MAX)
    throw fail("the file name is " + std::to_string(name.size()) + " bytes, over NAME_MAX (" +
               std::to_string(NAME_MAX) + ")");
  t.dir = t.path.parent_path();
  struct stat st {};
  if (::stat(t.path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode))
      throw fail(std::string("it is ") + file_kind(st.st_mode) +
                 "; only a regular file or a new name is replaced");
    t.mode = st.st_mode & 07777;
  } else if (errno != ENOENT) {
    throw fail(std::strerror(errno));
  }
  if (::stat(t.dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || ::access(t.dir.c_str(), W_OK) != 0)
    throw fail("directory '" + escape(t.dir.string()) + "' does not exist or is not writable");
  return t;
}

void check_output(const std::filesystem::path& path, const char* what) {
  const OutputTarget t = resolve_output(path, what);
  std::string probe = (t.dir / ".attn.XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0)
    throw InputError(escape(path.string()) + ": cannot write the " + what +
                     ": cannot create a file in '" + escape(t.dir.string()) +
                     "': " + std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace attn
