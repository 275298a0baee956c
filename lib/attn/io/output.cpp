#include "attn/io/output.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <random>
#include <stdexcept>
#include <utility>

#include "attn/error.hpp"
#include "attn/io/files.hpp"
#include "attn/io/signals.hpp"
#include "attn/io/text.hpp"

namespace attn {

namespace {

namespace fs = std::filesystem;

constexpr const char* kTempPrefix = ".attn.";  // + 6 characters: 12 bytes, far under NAME_MAX

// The file a path ends at, through symlinks (also dangling ones: the link's target is created,
// the link kept), so the rename replaces the target and not the link.
fs::path follow_links(fs::path p) {
  for (int hops = 0; hops < 40; ++hops) {  // as the kernel's limit on nested links
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) break;
    std::error_code ec;
    const fs::path to = fs::read_symlink(p, ec);
    if (ec) break;
    p = to.is_absolute() ? to : p.parent_path() / to;
  }
  std::error_code ec;
  const fs::path dir = fs::weakly_canonical(p.parent_path(), ec);
  return (ec ? p.parent_path() : dir) / p.filename();
}

// A new file beside the target, created with 0666 so the umask applies as to any new file.
int create_temp(const fs::path& dir, std::string& name) {
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::random_device rd;
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string leaf = kTempPrefix;
    for (int i = 0; i < 6; ++i) leaf += kChars[rd() % (sizeof kChars - 1)];
    name = (dir / leaf).string();
    const int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  return -1;
}

}  // namespace

OutputTarget resolve_output(const fs::path& path, const char* what) {
  const std::string source = escape(path.string());
  auto fail = [&](const std::string& why) -> InputError {
    return InputError(source + ": cannot write the " + what + ": " + why);
  };
  if (path.empty()) throw InputError(std::string("the ") + what + " path is empty");
  if (path.string().size() >= PATH_MAX)
    throw fail("the path is " + std::to_string(path.string().size()) + " bytes, over PATH_MAX");
  OutputTarget t;
  t.path = follow_links(fs::absolute(path));
  const std::string name = t.path.filename().string();
  if (name.empty() || name == "." || name == "..") throw fail("it names a directory");
  if (name.size() > NAME_MAX)
    throw fail("the file name is " + std::to_string(name.size()) + " bytes, over NAME_MAX (" +
               std::to_string(NAME_MAX) + ")");
  t.dir = t.path.parent_path();
  if (t.dir.string().size() + 13 >= PATH_MAX)
    throw fail("its directory's path is too long for a temporary file beside it");
  struct stat st {};
  if (::stat(t.path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode))
      throw fail(std::string("it is ") + file_kind(st.st_mode) +
                 "; only a regular file or a new name is replaced");
    t.mode = int(st.st_mode & 07777);
  } else if (errno != ENOENT) {
    throw fail(std::strerror(errno));
  }
  if (::stat(t.dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || ::access(t.dir.c_str(), W_OK) != 0)
    throw fail("directory '" + escape(t.dir.string()) + "' does not exist or is not writable");
  return t;
}

void check_output(const fs::path& path, const char* what) {
  const OutputTarget t = resolve_output(path, what);
  std::string probe;
  const int fd = create_temp(t.dir, probe);
  if (fd < 0)
    throw InputError(escape(path.string()) + ": cannot write the " + what +
                     ": cannot create a file in '" + escape(t.dir.string()) +
                     "': " + std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

OutputFile::OutputFile(const fs::path& path, const char* what)
    : out_(resolve_output(path, what)), what_(what), source_(escape(path.string())) {
  fd_ = create_temp(out_.dir, temp_);
  if (fd_ < 0) {
    const int err = errno;
    temp_.clear();
    fail(std::string("cannot create a temporary file in '") + escape(out_.dir.string()) +
         "': " + std::strerror(err));
  }
  watch_temp_file(temp_.c_str());
}

OutputFile::OutputFile(OutputFile&& o) noexcept
    : out_(std::move(o.out_)),
      what_(std::move(o.what_)),
      source_(std::move(o.source_)),
      temp_(std::exchange(o.temp_, {})),
      fd_(std::exchange(o.fd_, -1)) {}  // the signal slot knows the path by its text

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!temp_.empty()) {
    ::unlink(temp_.c_str());
    forget_temp_file(temp_.c_str());
  }
}

void OutputFile::fail(const std::string& why) const {
  throw std::runtime_error(source_ + ": cannot write the " + what_ + ": " + why);
}

void OutputFile::write(const void* data, std::size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail(std::strerror(w == 0 ? EIO : errno));  // EFBIG past `ulimit -f`, ENOSPC
    p += w;
    n -= std::size_t(w);
  }
}

void OutputFile::commit() {
  if (out_.mode >= 0 && ::fchmod(fd_, mode_t(out_.mode)) != 0)
    fail(std::string("cannot set its permissions: ") + std::strerror(errno));
  if (::fsync(fd_) != 0) fail(std::string("cannot sync: ") + std::strerror(errno));
  if (::close(std::exchange(fd_, -1)) != 0)
    fail(std::string("cannot close: ") + std::strerror(errno));
  if (::rename(temp_.c_str(), out_.path.c_str()) != 0)
    fail(std::string("cannot rename the temporary file into place: ") + std::strerror(errno));
  forget_temp_file(temp_.c_str());
  temp_.clear();
}

}  // namespace attn
