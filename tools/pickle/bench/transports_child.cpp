#include "transports_child.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <fstream>
#include <iterator>
#include <type_traits>

#include <pickle/error.hpp>

#include "core/clock.hpp"
#include "core/env.hpp"
#include "core/format.hpp"
#include "core/unique_fd.hpp"

extern char** environ;

namespace pickle::bench {
namespace {

/// The signals that stop a run and still let it remove its folder. SIGPIPE: the output's reader went away (a pipe
/// into `head`); SIGHUP: the terminal did.
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};

/// A signal of kStopSignals received while a ScratchDir existed (0: none).
volatile std::sig_atomic_t stop_signal = 0;

extern "C" void note_stop_signal(int signal) {
  if (stop_signal == 0) stop_signal = signal;  // the first says how the run ends
}

/// Thrown by run_child once a stop signal came: not an Error, so that no catch on the way records it as a failure.
struct Interrupted : std::exception {
  const char* what() const noexcept override { return "interrupted by a signal"; }
};

}  // namespace

ScratchDir::ScratchDir() {
  std::string base = env::foreign("TMPDIR").value_or("/tmp");
  std::string pattern = base + "/pickle-transports-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw SystemError(cat("bench transports: cannot create a scratch folder in ", base), errno);
  }
  path_ = pattern;
  // SA_RESETHAND: a second Ctrl-C ends the process at once, without waiting for the child's stop. Not for SIGPIPE:
  // every later write into the closed pipe raises it again, and would end the process before the folder goes.
  struct sigaction noted {};
  noted.sa_handler = note_stop_signal;
  sigemptyset(&noted.sa_mask);
  static_assert(std::size(kStopSignals) == std::extent_v<decltype(previous_)>);
  for (std::size_t i = 0; i < std::size(kStopSignals); ++i) {
    noted.sa_flags = kStopSignals[i] == SIGPIPE ? 0 : SA_RESETHAND;
    ::sigaction(kStopSignals[i], &noted, &previous_[i]);
    // A signal the process was started ignoring (a script's `trap "" INT`, nohup's SIGHUP) stays ignored.
    if (previous_[i].sa_handler == SIG_IGN) ::sigaction(kStopSignals[i], &previous_[i], nullptr);
  }
}

ScratchDir::~ScratchDir() {
  // Only files, written by our children: one level to remove.
  if (DIR* dir = ::opendir(path_.c_str())) {
    while (dirent* entry = ::readdir(dir)) {
      std::string name = entry->d_name;
      if (name != "." && name != "..") ::unlink((path_ + "/" + name).c_str());
    }
    ::closedir(dir);
  }
  ::rmdir(path_.c_str());
  for (std::size_t i = 0; i < std::size(kStopSignals); ++i) ::sigaction(kStopSignals[i], &previous_[i], nullptr);
  if (const int signal = stop_signal; signal != 0) {
    // The run was stopped: end as the signal asked (a shell sees 128 + its number), now that nothing is left behind.
    std::fflush(nullptr);
    ::signal(signal, SIG_DFL);
    ::raise(signal);
  }
}

std::string ChildOutcome::describe() const {
  if (timed_out) return cat("ran past its ", static_cast<long long>(seconds), " s limit and was stopped");
  if (exited) return cat("exited with code ", exit_code);
  return cat("was killed by signal ", signal, " (", ::strsignal(signal), ")");
}

namespace {

/// Everything execve needs, built before fork so that the child makes only async-signal-safe calls.
struct ExecImage {
  std::vector<std::string> argv, envp;
  std::vector<char*> argv_ptrs, envp_ptrs;

  ExecImage(const std::string& program, const std::vector<std::string>& args, const std::vector<std::string>& env)
      : envp(env) {
    argv.push_back(program);
    argv.insert(argv.end(), args.begin(), args.end());
    for (auto& a : argv) argv_ptrs.push_back(a.data());
    argv_ptrs.push_back(nullptr);
    for (auto& e : envp) envp_ptrs.push_back(e.data());
    envp_ptrs.push_back(nullptr);
  }
};

UniqueFd open_output(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) throw SystemError(cat("bench transports: cannot create ", path), errno);
  return fd;
}

void fill_outcome(ChildOutcome& outcome, int status) {
  outcome.exited = WIFEXITED(status);
  outcome.exit_code = outcome.exited ? WEXITSTATUS(status) : -1;
  outcome.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

/// Waits for `pid` until `deadline`, or until a stop signal came when `until_stopped`; true when it ended (status
/// filled).
bool wait_until(pid_t pid, const Deadline& deadline, int& status, bool until_stopped = false) {
  while (true) {
    pid_t got = ::waitpid(pid, &status, WNOHANG);
    if (got == pid) return true;
    if (got < 0 && errno != EINTR) throw SystemError(cat("bench transports: waitpid for child ", pid), errno);
    if (deadline.expired() || (until_stopped && stop_signal != 0)) return false;
    // Children run for seconds to minutes: a 20 ms poll costs nothing and needs no SIGCHLD plumbing.
    ::usleep(20'000);
  }
}

constexpr auto kStopGrace = std::chrono::seconds(10);  // the child's launcher itself waits 2 s before SIGKILL

}  // namespace

ChildOutcome run_child(const std::string& program, const std::vector<std::string>& args,
                       const std::vector<std::string>& env, const std::string& stdout_path,
                       const std::string& stderr_path, std::chrono::milliseconds limit) {
  if (stop_signal != 0) throw Interrupted();
  ExecImage image(program, args, env);
  UniqueFd out = open_output(stdout_path), err = open_output(stderr_path);
  UniqueFd null_in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  int status_pipe[2];
  if (::pipe2(status_pipe, O_CLOEXEC) != 0) throw SystemError("bench transports: pipe", errno);
  UniqueFd status_read(status_pipe[0]), status_write(status_pipe[1]);
  const pid_t parent = ::getpid();

  Stopwatch watch;
  pid_t pid = ::fork();
  if (pid < 0) throw SystemError(cat("bench transports: fork for ", program), errno);
  if (pid == 0) {
    // Child: async-signal-safe calls only, then exec. Dying with us keeps no process set running unwatched.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(out.get(), STDOUT_FILENO);
    ::dup2(err.get(), STDERR_FILENO);
    if (null_in) ::dup2(null_in.get(), STDIN_FILENO);
    ::execve(image.argv_ptrs[0], image.argv_ptrs.data(), image.envp_ptrs.data());
    int error = errno;
    [[maybe_unused]] ssize_t ignored = ::write(status_write.get(), &error, sizeof error);
    ::_exit(127);
  }
  status_write.reset();
  // The status pipe closes without data once exec worked (close-on-exec).
  int exec_error = 0;
  ssize_t n;
  do n = ::read(status_read.get(), &exec_error, sizeof exec_error);
  while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof exec_error)) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    throw SystemError(cat("bench transports: cannot execute ", program), exec_error);
  }

  ChildOutcome outcome;
  int status = 0;
  if (!wait_until(pid, Deadline(limit), status, /*until_stopped=*/true)) {
    outcome.timed_out = true;
    ::kill(pid, SIGTERM);
    if (!wait_until(pid, Deadline(kStopGrace), status)) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
  }
  // Stopped by a signal, whether the child was still running (stopped above) or ended by itself first (a terminal's
  // Ctrl-C reaches the whole process group): not a result. Its files are complete now: the ScratchDir on the way out
  // removes them, then ends the process.
  if (stop_signal != 0) throw Interrupted();
  fill_outcome(outcome, status);
  outcome.seconds = outcome.timed_out ? std::chrono::duration<double>(limit).count() : watch.seconds();
  return outcome;
}

std::chrono::milliseconds child_limit() {
  double seconds = std::max(900.0, 20 * env::timeout_seconds());
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
}

std::string file_tail(const std::string& path, int max_lines) {
  std::ifstream file(path);
  std::deque<std::string> lines;
  for (std::string line; std::getline(file, line);) {
    if (line.size() > 300) line = line.substr(0, 300) + "...";
    lines.push_back(std::move(line));
    if (static_cast<int>(lines.size()) > max_lines) lines.pop_front();
  }
  std::string text;
  for (const auto& line : lines) text += line + "\n";
  return text;
}

std::string self_executable() {
  char path[4096];
  ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  if (n < 0) throw SystemError("bench transports: readlink /proc/self/exe", errno);
  path[n] = '\0';
  return path;
}

std::vector<std::string> current_environment() {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

}  // namespace pickle::bench
