#pragma once
// attn-cli's signal handlers: the process is the CLI's, so it decides what a signal does (the
// library installs none, lib/attn/io/signals.hpp). SIGINT, SIGTERM, SIGHUP and SIGPIPE remove
// the temporary files of the outputs being written, then end the process as the signal would;
// one ignored when attn-cli started (nohup) stays ignored. SIGBUS inside a mapped file (it
// shrank under the run) prints a message naming the file and exits with status 1; SIGBUS
// elsewhere keeps its default action. SIGXFSZ is ignored, so a write past a file-size limit
// (`ulimit -f`) fails with EFBIG, an error the writer reports and cleans up after.

namespace cli {

// Once, at start, after MPI_Init (Open MPI installs a SIGBUS handler of its own there).
void install_signal_handlers();

}  // namespace cli
