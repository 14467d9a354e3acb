// Exclusive locks on the files of one run: an flock(2) on a lock file, holding the text
// "<host> <pid>" of its holder, so that a second lcm-train / lcm-pretrain on the same experiment,
// or a second writer of one .lcmb cache, stops with one line naming the first instead of mixing
// its files with the first's (docs/run-state.md "Locks").
#pragma once
#include <stdexcept>
#include <string>

namespace lcm {

/// What RunLock::acquire throws: `held` when another holder has the lock (the message names it),
/// else the lock file could not be created or locked (`err`: the errno of that failure).
struct RunLockError : std::runtime_error {
  RunLockError(const std::string& what, int err_, bool held_)
      : std::runtime_error(what), err(err_), held(held_) {}
  int err;
  bool held;
};

/// An exclusive lock held on a lock file until destruction (or release()). Move-only. The
/// flock, not the file's existence or its text, says whether the run is locked. release() removes
/// the lock file while still holding it (acquire re-checks, after locking, that the path still
/// names the file it locked, so this cannot let two holders in); the kernel drops the flock when
/// the process dies (kill -9 included), so a crash never leaves a run locked, only a lock file
/// with a stale text that the next acquire reuses.
/// On NFS, Linux emulates flock with a POSIX byte-range lock that other clients see (NFSv4, or
/// NFSv3 with lockd); a filesystem without locking makes acquire throw.
class RunLock {
 public:
  RunLock() = default;
  RunLock(RunLock&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) { o.fd_ = -1; }
  RunLock& operator=(RunLock&& o) noexcept;
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  ~RunLock() { release(); }

  /// Takes flock(LOCK_EX | LOCK_NB) on `lock_path` (created 0644 with its missing parent folders
  /// when absent), then writes "<host> <pid>\n" into it (host: gethostname, pid: getpid).
  /// `take` = false returns an empty lock without touching the file: under MPI only rank 0 locks
  /// (pass take = rank == 0), the other ranks of the same job share its files and must not
  /// stop on rank 0's lock.
  /// Throws RunLockError (held = true), naming `what` (e.g. "experiment lcm in /runs/a") and the
  /// lock file:
  ///   "<what> is in use by another run: host <host> pid <pid> holds <lock_path> (<hint>)"
  /// (" (<hint>)" only for a non-empty `hint`) when another open file description holds the
  /// lock (another process, or another RunLock of this process); host and pid are "unknown" when
  /// the holder has not written its text yet. Throws RunLockError (held = false) "cannot lock
  /// <lock_path>: <strerror>" when the file cannot be created or locked for another reason.
  /// `wait_s` > 0: while another holder has the lock, waits for it up to `wait_s` seconds
  /// (polling every 0.1 s), with one stderr line when the wait starts: "lcm: waiting for <what>:
  /// host H pid P holds <lock_path> (up to S s)"; the held error then ends with "(waited S s;
  /// <hint>)".
  static RunLock acquire(const std::string& lock_path, const std::string& what,
                         const std::string& hint, bool take = true, double wait_s = 0);

  /// Whether this object holds a lock.
  bool held() const { return fd_ >= 0; }
  /// The lock file ("" for an empty lock).
  const std::string& path() const { return path_; }
  /// Removes the lock file and drops the lock (closing the file). No-op for an empty lock.
  void release() noexcept;

 private:
  int fd_ = -1;
  std::string path_;
};

/// The lock file of experiment `name` under `base_path`: "<base_path>/lcm_<name>.lock". One lock
/// per experiment, since every file of a run carries its experiment.name (docs/run-state.md):
/// two experiments may share a base path (and its cache, which has its own lock).
std::string run_lock_path(const std::string& base_path, const std::string& name);

/// RunLock::acquire(run_lock_path(base_path, name), ...) for lcm-train and lcm-pretrain at
/// startup: the error reads "experiment <name> in <base_path> is in use by another run: host H
/// pid P holds <base_path>/lcm_<name>.lock (wait for it to finish, or use another
/// experiment.name or experiment.base_path)". `take` as in RunLock::acquire: under MPI, pass
/// take = (rank == 0).
RunLock lock_experiment(const std::string& base_path, const std::string& name, bool take = true);

/// The start-of-run cleanup of what killed runs left: remove_stale_temps (atomic_file.hpp) of
/// <base_path> (".jsonl", ".csv", ".svg", ".json": logs, plots, eval reports),
/// <base_path>/weights (".safetensors") and <base_path>/cache (".lcmb"). Only this host's temp
/// files of dead processes go; one stderr line per file. Returns the number removed. Never throws.
int remove_stale_run_temps(const std::string& base_path);

}  // namespace lcm
