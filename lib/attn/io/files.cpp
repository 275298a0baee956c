#include "attn/io/files.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <utility>

#include "attn/error.hpp"
#include "attn/io/signals.hpp"
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

MappedFile::~MappedFile() {
  if (bytes.empty()) return;
  unwatch_mapping(bytes.data());
  ::munmap(const_cast<std::uint8_t*>(bytes.data()), bytes.size());
}

std::shared_ptr<const MappedFile> map_file(const std::filesystem::path& path, const char* what) {
  return map_file(open_regular(path, what), what);
}

std::shared_ptr<const MappedFile> map_file(const InputFile& in, const char* what) {
  auto m = std::make_shared<MappedFile>();
  m->source = in.source;
  if (in.size == 0) return m;  // mmap refuses a length of 0
  if (in.size > std::uint64_t(SIZE_MAX))
    throw InputError(in.source + ": the " + what + " file is too large to map");
  void* p = ::mmap(nullptr, std::size_t(in.size), PROT_READ, MAP_PRIVATE, in.fd, 0);
  if (p == MAP_FAILED)
    throw InputError(in.source + ": cannot map the " + what + " file: " + std::strerror(errno));
  watch_mapping(p, in.size, m->source.c_str());
  m->bytes = {static_cast<const std::uint8_t*>(p), std::size_t(in.size)};
  return m;
}

FileHead read_head(const std::filesystem::path& path, const char* what, std::uint64_t max_bytes) {
  return read_head(open_regular(path, what), what, max_bytes);
}

FileHead read_head(const InputFile& in, const char* what, std::uint64_t max_bytes) {
  FileHead h;
  h.source = in.source;
  h.size = in.size;
  h.bytes.resize(std::size_t(std::min(in.size, max_bytes)));
  std::size_t done = 0;
  while (done < h.bytes.size()) {
    const ssize_t n = ::pread(in.fd, h.bytes.data() + done, h.bytes.size() - done, off_t(done));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0)
      throw InputError(in.source + ": cannot read the " + what + " file: " + std::strerror(errno));
    if (n == 0) break;  // shrank meanwhile: what was read is the head
    done += std::size_t(n);
  }
  h.bytes.resize(done);
  return h;
}

std::string read_small_file(const std::filesystem::path& path, const char* what,
                            std::uint64_t max_bytes) {
  return read_small_file(open_regular(path, what), what, max_bytes);
}

std::string read_small_file(const InputFile& f, const char* what, std::uint64_t max_bytes) {
  if (f.size > max_bytes)
    throw InputError(f.source + ": the " + what + " file is " + std::to_string(f.size) +
                     " bytes, over the limit of " + std::to_string(max_bytes));
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::pread(f.fd, buf, sizeof buf, off_t(text.size()));
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
