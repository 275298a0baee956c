#include "attn/text/regex.hpp"

#include <oniguruma.h>
#include <time.h>

#include <algorithm>
#include <climits>
#include <mutex>

#include "attn/error.hpp"
#include "attn/io/text.hpp"
#include "attn/text/unicode.hpp"

namespace attn {

namespace {

// Real pre-tokenizer patterns (GPT-2's, Llama 3's) spend 2-3 retries a byte, and searches are
// charged at least kFirstLimit each (one per match, a match every ~5 bytes of English: 14 a byte
// charged); 256 a byte leaves room for several Split steps. A retry costs ~25 ns, so the budget
// is about 6 us a byte; `(\w+\s?)+$` on 4.4 KB, 15 s without it, now stops after ~0.05 s.
constexpr std::uint64_t kRetriesBase = std::uint64_t(1) << 20, kRetriesPerByte = 256;
// The backstop: 100 times what real patterns take per byte (~50 ns in Release), plus a base.
constexpr double kCpuBase = 5.0, kCpuPerByte = 5e-6;
// Long runs of spaces or letters take 1-2 stack entries a byte under real patterns.
constexpr std::size_t kStackBase = std::size_t(1) << 16, kStackPerByte = 4;
// A search is first allowed this many retries, doubled (and repeated) while it needs more.
constexpr std::uint64_t kFirstLimit = 64;
// The retries a search over the rest of the text may spend before this find_all tries one start
// at a time (real patterns on real text: 32 at most, but 16,384 for a run of 10,000 spaces).
constexpr std::uint64_t kFastLimit = 1024;

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

std::string onig_message(int code, OnigErrorInfo* info) {
  OnigUChar buf[ONIG_MAX_ERROR_MESSAGE_LEN];
  const int n = info ? onig_error_code_to_str(buf, code, info) : onig_error_code_to_str(buf, code);
  // The message may quote the pattern (a group's name): escaped like any text from a file.
  return escape(std::string_view(reinterpret_cast<const char*>(buf), std::size_t(n > 0 ? n : 0)));
}

void initialise_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
    onig_initialize(encodings, 1);
  });
}

}  // namespace

RegexBudget::RegexBudget(std::size_t text_bytes)
    : bytes(text_bytes),
      retries(kRetriesBase + kRetriesPerByte * std::uint64_t(text_bytes)),
      retries_left(retries),
      cpu_seconds(kCpuBase + kCpuPerByte * double(text_bytes)),
      start_cpu(thread_cpu_seconds()),
      next_clock_check(std::chrono::steady_clock::now()),
      stack_entries(std::min<std::uint64_t>(
          UINT_MAX, kStackBase + kStackPerByte * std::uint64_t(text_bytes))) {}

struct Regex::Impl {
  regex_t* re = nullptr;
  ~Impl() {
    if (re) onig_free(re);
  }
};

Regex::Regex(const std::string& pattern, const std::string& source, const std::string& what)
    : impl_(std::make_unique<Impl>()) {
  initialise_once();
  OnigErrorInfo info{};
  const auto* p = reinterpret_cast<const OnigUChar*>(pattern.data());
  const int r = onig_new(&impl_->re, p, p + pattern.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8,
                         ONIG_SYNTAX_RUBY, &info);
  if (r != ONIG_NORMAL) {
    impl_->re = nullptr;
    throw InputError(source + ": " + what + ": " + onig_message(r, &info));
  }
}

Regex::~Regex() = default;
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;

namespace {

// One find_all's searches: Oniguruma's region and match parameters, and the budget they spend.
// A search first runs over the rest of the text as Oniguruma optimises it, allowed a few retries;
// one that needs more (each failed start costs one, and may scan far before it fails) switches
// this find_all to trying one start at a time, reading the clock between starts.
class Search {
 public:
  Search(regex_t* re, std::string_view s, RegexBudget& b, const std::string& where)
      : re_(re),
        s_(s),
        b_(b),
        where_(where),
        region_(onig_region_new()),
        mp_(onig_new_match_param()) {
    onig_initialize_match_param(mp_);
    onig_set_match_stack_limit_size_of_match_param(mp_, unsigned(b_.stack_entries));
  }
  ~Search() {
    onig_region_free(region_, 1);
    onig_free_match_param(mp_);
  }
  Search(const Search&) = delete;
  Search& operator=(const Search&) = delete;

  // The leftmost match starting at or after `at`, or false.
  bool next(std::size_t at, std::size_t& b, std::size_t& e) {
    const auto* str = reinterpret_cast<const OnigUChar*>(s_.data());
    const OnigUChar* end = str + s_.size();
    if (!one_start_at_a_time_) {
      const int r = run(kFastLimit, [&] {
        return onig_search_with_param(re_, str, end, str + at, end, region_, ONIG_OPTION_NONE, mp_);
      });
      if (r >= 0) {
        b = std::size_t(region_->beg[0]);
        e = std::size_t(region_->end[0]);
        return true;
      }
      if (r == ONIG_MISMATCH) return false;
      one_start_at_a_time_ = true;
    }
    for (std::size_t p = at; p <= s_.size(); p += p < s_.size() ? code_point_bytes(s_, p) : 1) {
      // \G is the search's start, `at`: no later start is it.
      const OnigOptionType option = p > at ? ONIG_OPTION_NOT_BEGIN_POSITION : ONIG_OPTION_NONE;
      const int r = run(
          0, [&] { return onig_match_with_param(re_, str, end, str + p, region_, option, mp_); });
      if (r >= 0) {
        b = p;
        e = p + std::size_t(r);
        return true;
      }
    }
    return false;
  }

 private:
  static constexpr int kGaveUp = ONIG_MISMATCH - 1000;

  // One search or match, its retry limit doubled while it needs more (it is repeated: results
  // do not depend on the limit), up to `cap` (then kGaveUp; 0: the budget). Returns Oniguruma's
  // result (>= 0 or ONIG_MISMATCH); throws InputError for anything else.
  template <class F>
  int run(std::uint64_t cap, F onig) {
    check_clock();
    for (std::uint64_t limit = std::min(kFirstLimit, b_.retries_left);;) {
      if (limit == 0) out_of_retries();
      onig_set_retry_limit_in_search_of_match_param(mp_, static_cast<unsigned long>(limit));
      const int r = onig();
      b_.retries_left -= limit;  // an upper bound of what it spent
      if (r >= 0 || r == ONIG_MISMATCH) return r;
      if (r == ONIGERR_RETRY_LIMIT_IN_MATCH_OVER) out_of_retries();
      if (r == ONIGERR_MATCH_STACK_LIMIT_OVER)
        fail("needs more than " + std::to_string(b_.stack_entries) +
             " entries of backtracking stack");
      if (r != ONIGERR_RETRY_LIMIT_IN_SEARCH_OVER) fail(onig_message(r, nullptr));
      if (cap && limit >= cap) return kGaveUp;
      limit = std::min(2 * limit, b_.retries_left);
      check_clock();
    }
  }

  // The steady clock is cheap and never behind this thread's CPU time: the CPU clock (a system
  // call) is read only once the wall time could have used up what is left.
  void check_clock() {
    const auto now = std::chrono::steady_clock::now();
    if (now < b_.next_clock_check) return;
    const double left = b_.cpu_seconds - (thread_cpu_seconds() - b_.start_cpu);
    if (left <= 0)
      fail("exceeds its limit of " + std::to_string(b_.cpu_seconds).substr(0, 4) +
           " s of CPU time");
    b_.next_clock_check = now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                    std::chrono::duration<double>(left));
  }

  [[noreturn]] void out_of_retries() {
    fail("exceeds its limit of " + std::to_string(b_.retries) +
         " retries (the pattern backtracks catastrophically on this text)");
  }

  [[noreturn]] void fail(const std::string& what) {
    throw InputError(where_ + ": the regex search on a text of " + std::to_string(b_.bytes) +
                     " bytes " + what);
  }

  regex_t* re_;
  std::string_view s_;
  RegexBudget& b_;
  const std::string& where_;
  OnigRegion* region_;
  OnigMatchParam* mp_;
  bool one_start_at_a_time_ = false;
};

}  // namespace

std::vector<std::pair<std::size_t, std::size_t>> Regex::find_all(std::string_view s,
                                                                 RegexBudget& budget,
                                                                 const std::string& where) const {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  Search search(impl_->re, s, budget, where);
  std::size_t at = 0, b = 0, e = 0;
  while (at <= s.size() && search.next(at, b, e)) {
    if (e > b) {
      out.emplace_back(b, e);
      at = e;
    } else {
      if (b >= s.size()) break;
      at = b + code_point_bytes(s, b);
    }
  }
  return out;
}

}  // namespace attn
