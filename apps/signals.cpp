#include "signals.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <initializer_list>

#include "attn/io/signals.hpp"

namespace cli {

namespace {

// Only async-signal-safe calls below: write, _exit, signal, raise, unlink (through the library).
void put(const char* s) {
  ssize_t r = ::write(STDERR_FILENO, s, std::strlen(s));
  (void)r;
}

void on_sigbus(int sig, siginfo_t* info, void*) {
  if (const char* path = attn::mapped_file_at(info->si_addr)) {
    put("attn-cli: error: ");
    put(path);
    put(": the file shrank while the run had it mapped (truncated or rewritten under it); "
        "the run cannot go on\n");
    ::_exit(1);
  }
  ::signal(sig, SIG_DFL);  // not a mapped file's: the default action
  ::raise(sig);
}

void on_terminate(int sig) {
  attn::remove_temp_files();
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

void install_signal_handlers() {
  struct sigaction bus {};
  bus.sa_sigaction = on_sigbus;
  bus.sa_flags = SA_SIGINFO;
  sigemptyset(&bus.sa_mask);
  ::sigaction(SIGBUS, &bus, nullptr);
  ::signal(SIGXFSZ, SIG_IGN);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) {
    struct sigaction old {};
    ::sigaction(sig, nullptr, &old);
    if (old.sa_handler == SIG_IGN) continue;  // e.g. nohup: keep ignoring
    struct sigaction term {};
    term.sa_handler = on_terminate;
    sigemptyset(&term.sa_mask);
    ::sigaction(sig, &term, nullptr);
  }
}

}  // namespace cli
