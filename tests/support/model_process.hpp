// The Tiramisu autoscheduler's side of the model-process protocol (tiramisu_evaluator.cpp of the
// LOOPer branch): two pipes, fork, execv of the model command (no PATH search), the query lines
// written with fputs and flushed, the answer read with fscanf("%f"). Used by test_serve and
// bench_serve to drive lcm-serve exactly as the autoscheduler does. No doctest here.
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace lcm::test {

/// One model process. stderr goes to `err_path` (the autoscheduler leaves it alone; tests read
/// it). Throws std::runtime_error when the pipes or the fork fail.
class ModelProcess {
 public:
  ModelProcess(const std::vector<std::string>& argv, const std::string& err_path) {
    int to_child[2], from_child[2];
    if (pipe(to_child) != 0 || pipe(from_child) != 0)
      throw std::runtime_error("ModelProcess: pipe() failed");
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("ModelProcess: fork() failed");
    if (pid_ == 0) {
      dup2(to_child[0], 0);
      dup2(from_child[1], 1);
      const int e = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (e >= 0) dup2(e, 2);
      close(to_child[0]);
      close(to_child[1]);
      close(from_child[0]);
      close(from_child[1]);
      std::vector<char*> args;
      for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    in_ = fdopen(to_child[1], "w");
    out_ = fdopen(from_child[0], "r");
  }
  ~ModelProcess() { finish(); }
  ModelProcess(const ModelProcess&) = delete;
  ModelProcess& operator=(const ModelProcess&) = delete;

  /// Writes the lines of one query and reads its answer; NaN when none could be read.
  double ask(const std::vector<std::string>& lines) {
    for (const std::string& l : lines) {
      std::fputs(l.c_str(), in_);
      std::fputs("\n", in_);
    }
    std::fflush(in_);
    float v = NAN;
    if (std::fscanf(out_, "%f", &v) != 1) return NAN;
    return v;
  }
  /// Reads one whole answer line (without the newline); "" at end of output.
  std::string read_line() {
    std::string line;
    for (int c; (c = std::fgetc(out_)) != EOF && c != '\n';) line += char(c);
    return line;
  }
  /// Writes raw text without reading an answer (a client that stops mid-query).
  void write_raw(const std::string& text) {
    std::fputs(text.c_str(), in_);
    std::fflush(in_);
  }
  void signal(int sig) { kill(pid_, sig); }
  /// Closes the pipe (EOF), waits, and returns the exit code (−1: killed by a signal).
  int finish() {
    if (in_) std::fclose(in_);
    in_ = nullptr;
    return wait_exit();
  }
  /// Waits for the process to exit by itself (after a signal); returns its exit code.
  int wait_exit() {
    if (pid_ > 0) {
      int st = 0;
      waitpid(pid_, &st, 0);
      code_ = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
      pid_ = 0;
    }
    if (in_) std::fclose(in_);
    if (out_) std::fclose(out_);
    in_ = out_ = nullptr;
    return code_;
  }

 private:
  pid_t pid_ = 0;
  int code_ = -1;
  FILE* in_ = nullptr;
  FILE* out_ = nullptr;
};

}  // namespace lcm::test
