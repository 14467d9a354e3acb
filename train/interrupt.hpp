// Graceful stop of a training run on SIGINT / SIGTERM (Ctrl-C, a batch system's stop request):
// the first signal only raises a flag, which the training loop reads after each step to save its
// state and return; a second one exits at once without saving.
#pragma once
#include <atomic>

namespace lcm::train {

/// The flag set by the first SIGINT/SIGTERM after install_stop_handlers().
std::atomic<bool>& stop_requested();

/// Installs the SIGINT and SIGTERM handlers: the first signal sets stop_requested(); a second
/// one while stopping prints "<tool>: second interrupt, exiting without saving", removes the
/// temp file of an atomic write or cache write in progress (the files on disk stay the previous
/// complete ones) and exits with 128 + signal (130 for Ctrl-C). `tool` must outlive the process.
void install_stop_handlers(const char* tool);

}  // namespace lcm::train
