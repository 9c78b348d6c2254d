#include "launcher.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>

#include <pickle/error.hpp>

#include "core/clock.hpp"
#include "core/env.hpp"
#include "core/format.hpp"
#include "core/log.hpp"
#include "core/unique_fd.hpp"
#include "output_sink.hpp"
#include "signal_channel.hpp"

extern char** environ;

namespace pickle::launch {
namespace {

// How long ranks get to die after SIGKILL before the launcher gives up on them (a process stuck in the kernel,
// for example inside a GPU driver call, cannot be killed sooner; waiting forever would hang the job).
constexpr auto kKillWait = std::chrono::seconds(5);

// A line longer than this without a terminator is forwarded in pieces, so one rank cannot grow our memory unbounded.
constexpr std::size_t kMaxLine = 1 << 20;

/// A pipe whose ends are close-on-exec (a child gets its end through dup2, which clears the flag).
struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

Pipe make_pipe(std::string_view what) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw SystemError(cat("launch: pipe for ", what), errno);
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

void set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) throw SystemError("launch: fcntl O_NONBLOCK", errno);
}

/// One of a rank's output pipes: reads what the rank wrote and forwards it line by line, each line with the rank's
/// prefix. '\n' ends a line; so does a lone '\r', so that progress bars redraw in place instead of piling up.
class LineForwarder {
 public:
  LineForwarder(UniqueFd fd, OutputSink& sink, std::string prefix) : fd_(std::move(fd)), sink_(&sink), prefix_(std::move(prefix)) {}

  int fd() const { return fd_.get(); }
  bool open() const { return fd_.valid(); }
  /// Its sink holds too much: reading more would only grow the queue (the rank waits on its pipe meanwhile).
  bool paused() const { return sink_->backlogged(); }

  /// Reads once (the fd is readable); forwards complete lines; at end of file forwards the rest and closes.
  void on_readable() {
    if (read_once() == ReadResult::Eof) finish();
  }

  /// The rank has exited: forward whatever is still in the pipe, then close it. Bounded, because a grandchild that
  /// inherited the pipe may still be writing.
  void drain_and_close() {
    for (int i = 0; i < 256 && open(); ++i) {
      ReadResult result = read_once();
      if (result == ReadResult::Eof || result == ReadResult::Empty) break;
    }
    finish();
  }

 private:
  enum class ReadResult { Data, Empty, Eof };

  ReadResult read_once() {
    if (!open()) return ReadResult::Eof;
    char chunk[64 * 1024];
    ssize_t n = ::read(fd_.get(), chunk, sizeof chunk);
    if (n > 0) {
      pending_.append(chunk, static_cast<std::size_t>(n));
      forward(false);
      return ReadResult::Data;
    }
    if (n == 0) return ReadResult::Eof;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return ReadResult::Empty;
    return ReadResult::Eof;  // EIO and friends: nothing more will come from this pipe
  }

  void finish() {
    if (!open()) return;
    forward(true);
    fd_.reset();
  }

  // Sends every complete line of pending_ (and, at the end, the unterminated rest) in one write.
  void forward(bool at_end) {
    std::string out;
    std::size_t start = 0;
    while (start < pending_.size()) {
      std::size_t end = pending_.find_first_of("\r\n", start);
      if (end == std::string::npos) break;
      if (pending_[end] == '\r') {
        // "\r\n" is one terminator; a '\r' at the end of what we have may be the first half of one.
        if (end + 1 == pending_.size() && !at_end) break;
        if (end + 1 < pending_.size() && pending_[end + 1] == '\n') ++end;
      }
      out += prefix_;
      out.append(pending_, start, end + 1 - start);
      start = end + 1;
    }
    pending_.erase(0, start);
    if (!pending_.empty() && (at_end || pending_.size() >= kMaxLine)) {
      out += prefix_;
      out += pending_;
      out += '\n';
      pending_.clear();
    }
    if (!out.empty()) sink_->write(std::move(out));
    if (sink_->broken()) {
      pending_.clear();
      fd_.reset();
    }
  }

  UniqueFd fd_;
  OutputSink* sink_;
  std::string prefix_;
  std::string pending_;
};

/// Why a child could not become the command; sent over a close-on-exec pipe that closes silently when exec works.
struct ExecFailure {
  int stage;  // 0: setpgid, 1: exec
  int error;
};

/// Everything execve needs, built before fork so that the child only makes async-signal-safe calls.
struct ExecImage {
  std::string path;
  std::vector<std::string> argv;
  std::vector<std::string> envp;
  std::vector<char*> argv_ptrs;
  std::vector<char*> envp_ptrs;

  void seal() {
    for (auto& a : argv) argv_ptrs.push_back(a.data());
    argv_ptrs.push_back(nullptr);
    for (auto& e : envp) envp_ptrs.push_back(e.data());
    envp_ptrs.push_back(nullptr);
  }
};

/// Sets NAME=VALUE in an environment list, replacing an earlier entry of that name.
void set_entry(std::vector<std::string>& env, std::string_view name, std::string_view value) {
  std::string key = cat(name, "=");
  std::erase_if(env, [&](const std::string& entry) { return entry.starts_with(key); });
  env.push_back(key + std::string(value));
}

std::string_view entry_name(std::string_view entry) { return entry.substr(0, entry.find('=')); }

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return cat("exited with code ", WEXITSTATUS(status));
  int sig = WTERMSIG(status);
  return cat("was killed by signal ", sig, " (", ::strsignal(sig), ")");
}

int exit_code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

std::string ranks_word(int n) { return n == 1 ? "rank" : "ranks"; }

/// Whether two descriptors lead to the same file (the same terminal, pipe or regular file).
bool same_file(int a, int b) {
  struct stat sa {}, sb {};
  if (::fstat(a, &sa) != 0 || ::fstat(b, &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/// One started rank.
struct Rank {
  int index = 0;
  pid_t pid = -1;
  bool running = false;
  std::optional<LineForwarder> out;
  std::optional<LineForwarder> err;
};

/// One job: N ranks in their own process group, watched by one poll() loop until all have exited.
class Job {
 public:
  explicit Job(const LaunchOptions& options)
      : options_(options),
        stdout_(STDOUT_FILENO),
        separate_stderr_(same_file(STDOUT_FILENO, STDERR_FILENO) ? nullptr : std::make_unique<OutputSink>(STDERR_FILENO)),
        stderr_(separate_stderr_ ? *separate_stderr_ : stdout_),
        ranks_(static_cast<std::size_t>(options.nproc)) {}
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // Reached with ranks still running only when something threw: never leave them behind.
  ~Job() {
    if (running_count() == 0 || gave_up_) return;
    phase_ = Phase::Killing;  // their deaths are our doing: no failure reports
    signal_ranks(SIGKILL);
    Deadline deadline(kKillWait);
    while (running_count() > 0 && !deadline.expired()) {
      reap();
      if (running_count() > 0) ::usleep(10'000);
    }
  }

  int run() {
    std::string path = resolve_program(options_.command.front(), env::foreign("PATH").value_or("/usr/bin:/bin"));
    std::vector<std::string> base_env = job_environment();
    for (int r = 0; r < options_.nproc; ++r) start_rank(r, path, base_env);
    return event_loop();
  }

 private:
  enum class Phase { Running, Stopping, Killing };

  // The environment shared by every rank: ours, the user's --env entries, then the variables the launcher owns.
  std::vector<std::string> job_environment() {
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
    for (const auto& entry : options_.extra_env) set_entry(env, entry_name(entry), entry.substr(entry.find('=') + 1));
    int port = options_.master_port > 0 ? options_.master_port : pick_free_port(options_.master_addr);
    set_entry(env, "WORLD_SIZE", std::to_string(options_.nproc));
    set_entry(env, "LOCAL_WORLD_SIZE", std::to_string(options_.nproc));
    set_entry(env, "MASTER_ADDR", options_.master_addr);
    set_entry(env, "MASTER_PORT", std::to_string(port));
    // A fresh token per job keeps a stray client (an earlier job on the same port) out of this job's store.
    bool user_token = env::get_if_set("PICKLE_TOKEN").has_value();
    for (const auto& entry : options_.extra_env) user_token |= entry.starts_with("PICKLE_TOKEN=") && entry.size() > 13;
    if (!user_token) set_entry(env, "PICKLE_TOKEN", random_token());
    return env;
  }

  void start_rank(int r, const std::string& path, const std::vector<std::string>& base_env) {
    ExecImage image{path, options_.command, base_env, {}, {}};
    set_entry(image.envp, "RANK", std::to_string(r));
    set_entry(image.envp, "LOCAL_RANK", std::to_string(r));
    image.seal();

    Pipe out = make_pipe(cat("rank ", r, " stdout"));
    Pipe err = make_pipe(cat("rank ", r, " stderr"));
    Pipe status = make_pipe(cat("rank ", r, " exec status"));
    pid_t parent = ::getpid();
    pid_t group = pgid_;

    // Blocked across fork: the child must not run the launcher's handlers (they write to the launcher's pipe).
    const sigset_t mask = signals_.block_handled();
    pid_t pid = ::fork();
    if (pid != 0) {
      const int fork_errno = errno;
      ::pthread_sigmask(SIG_SETMASK, &mask, nullptr);
      if (pid < 0) throw SystemError(cat("launch: fork for rank ", r, " of ", options_.nproc), fork_errno);
    }
    if (pid == 0) {
      // Child: async-signal-safe calls only, then exec.
      auto fail = [&](int stage) {
        ExecFailure failure{stage, errno};
        [[maybe_unused]] ssize_t ignored = ::write(status.write.get(), &failure, sizeof failure);
        ::_exit(127);
      };
      if (::setpgid(0, group) != 0) fail(0);
      // Ranks must not outlive a launcher that was killed outright (SIGKILL gives it no chance to stop them).
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      ::dup2(out.write.get(), STDOUT_FILENO);
      ::dup2(err.write.get(), STDERR_FILENO);
      // The ranks run in a background process group: reading the terminal would stop them, so stdin is empty.
      int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
      signals_.restore_in_child(mask);
      ::execve(image.path.c_str(), image.argv_ptrs.data(), image.envp_ptrs.data());
      fail(1);
    }

    Rank& rank = ranks_[static_cast<std::size_t>(r)];
    rank.index = r;
    rank.pid = pid;
    rank.running = true;
    if (r == 0) pgid_ = pid;
    out.write.reset();
    err.write.reset();
    status.write.reset();
    set_nonblocking(out.read.get());
    set_nonblocking(err.read.get());
    std::string prefix = options_.prefix ? cat("[", r, "] ") : "";
    rank.out.emplace(std::move(out.read), stdout_, prefix);
    rank.err.emplace(std::move(err.read), stderr_, prefix);

    // Wait for exec: the status pipe closes without data when it worked.
    ExecFailure failure{};
    ssize_t n;
    do n = ::read(status.read.get(), &failure, sizeof failure);
    while (n < 0 && errno == EINTR);
    if (n == static_cast<ssize_t>(sizeof failure)) {
      throw SystemError(cat("launch: rank ", r, ": ", failure.stage == 0 ? "setpgid failed before executing " : "cannot execute ",
                            path),
                        failure.error);
    }
    PICKLE_LOG(Info, "launch", "rank " << r << " started as pid " << pid << ": " << path);
  }

  int running_count() const {
    int n = 0;
    for (const auto& rank : ranks_) n += rank.running ? 1 : 0;
    return n;
  }

  // The whole process group (so that a rank's own children hear it too), and each rank by pid in case one moved
  // to a group of its own. Only while a rank is unreaped: its pid cannot be reused until we wait for it.
  void signal_ranks(int sig) {
    if (pgid_ > 0 && running_count() > 0) ::killpg(pgid_, sig);
    for (const auto& rank : ranks_) {
      if (rank.running) ::kill(rank.pid, sig);
    }
  }

  void message(const std::string& text) { stderr_.write(cat("pickle launch: ", text, "\n")); }

  void begin_stop(int sig) {
    signal_ranks(sig);
    phase_ = Phase::Stopping;
    deadline_.emplace(options_.grace);
  }

  void escalate() {
    signal_ranks(SIGKILL);
    phase_ = Phase::Killing;
    deadline_.emplace(kKillWait);
  }

  void on_rank_exit(Rank& rank, int status) {
    rank.running = false;
    // Forward the rank's last words before we talk about its death.
    if (rank.out) rank.out->drain_and_close();
    if (rank.err) rank.err->drain_and_close();
    bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    PICKLE_LOG(Info, "launch", "rank " << rank.index << " (pid " << rank.pid << ") " << describe_wait_status(status));
    if (!failed || phase_ != Phase::Running) return;
    exit_code_ = exit_code_of(status);
    int others = running_count();
    std::string text = cat("rank ", rank.index, " (pid ", rank.pid, ") ", describe_wait_status(status));
    if (others > 0) text += cat("; stopping the other ", others, " ", ranks_word(others));
    if (!(options_.quiet_exits && WIFEXITED(status))) message(text);
    begin_stop(SIGTERM);
  }

  void reap() {
    for (auto& rank : ranks_) {
      if (!rank.running) continue;
      int status = 0;
      pid_t got = ::waitpid(rank.pid, &status, WNOHANG);
      if (got == rank.pid) on_rank_exit(rank, status);
    }
  }

  void on_signal(int sig) {
    if (sig == SIGCHLD) return reap();
    int n = running_count();
    if (phase_ == Phase::Running) {
      exit_code_ = 128 + sig;
      stopped_by_signal_ = true;
      message(cat("received signal ", sig, " (", ::strsignal(sig), "); forwarding it to ", n, " ", ranks_word(n)));
      begin_stop(sig);
    } else if (phase_ == Phase::Stopping) {
      // A second interrupt means "now".
      message(cat("received signal ", sig, " (", ::strsignal(sig), ") again; killing ", n, " ", ranks_word(n)));
      escalate();
    }
  }

  void on_deadline() {
    int n = running_count();
    if (phase_ == Phase::Stopping) {
      message(cat(n, " ", ranks_word(n), " still running ", options_.grace.count() / 1000.0,
                  " s after the stop signal; sending SIGKILL"));
      escalate();
      return;
    }
    for (const auto& rank : ranks_) {
      if (rank.running) message(cat("rank ", rank.index, " (pid ", rank.pid, ") did not exit after SIGKILL"));
    }
    gave_up_ = true;
  }

  static constexpr int kReapIntervalMs = 100;
  static constexpr auto kFlushAfterSignal = std::chrono::seconds(1);

  int event_loop() {
    std::vector<pollfd> fds;
    std::vector<LineForwarder*> forwarders;
    while (running_count() > 0 && !gave_up_) {
      fds.clear();
      forwarders.clear();
      fds.push_back({signals_.fd(), POLLIN, 0});
      for (auto& rank : ranks_) {
        for (auto* f : {&rank.out, &rank.err}) {
          if (*f && (*f)->open() && !(*f)->paused()) {
            fds.push_back({(*f)->fd(), POLLIN, 0});
            forwarders.push_back(&**f);
          }
        }
      }
      // Every kReapInterval at least: a paused forwarder resumes once its sink drained, and child exits are polled
      // for too (a SIGCHLD dropped on a full signal pipe).
      int timeout = deadline_ ? std::min(deadline_->remaining_ms(), kReapIntervalMs) : kReapIntervalMs;
      int ready = ::poll(fds.data(), fds.size(), timeout);
      if (ready < 0) {
        if (errno == EINTR) continue;
        throw SystemError("launch: poll", errno);
      }
      // Output first, so that a rank's last lines come before the news of its exit.
      for (std::size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents != 0) forwarders[i - 1]->on_readable();
      }
      if (fds[0].revents != 0) {
        while (auto sig = signals_.next()) on_signal(*sig);
      }
      reap();
      if (deadline_ && deadline_->expired() && running_count() > 0) on_deadline();
    }
    flush_output();
    return exit_code_.value_or(gave_up_ ? 1 : 0);
  }

  /// After the last rank: writes out what the sinks still hold, like any program whose reader is slow. A reader who
  /// never reads would keep the launcher forever, so a signal ends the wait, and after a stop by signal it lasts at
  /// most kFlushAfterSignal.
  void flush_output() {
    const Deadline deadline = stopped_by_signal_ ? Deadline(kFlushAfterSignal) : Deadline::after_seconds(kMaxWaitSeconds);
    while (true) {
      const auto slice = std::chrono::milliseconds(kReapIntervalMs);
      if (stdout_.flush(Deadline(slice)) && stderr_.flush(Deadline(slice))) return;
      if (deadline.expired()) {
        stdout_.give_up();
        stderr_.give_up();
        return;
      }
      while (auto sig = signals_.next()) {
        if (*sig == SIGCHLD) continue;
        if (!exit_code_) exit_code_ = 128 + *sig;
        return;
      }
    }
  }

  const LaunchOptions& options_;
  SignalChannel signals_;
  OutputSink stdout_;
  // stderr's own sink, unless fds 1 and 2 are one file (`2>&1`, one terminal): then one sink writes both, so that
  // what reaches that file keeps the order it happened in (a rank's last lines before the news of its exit).
  std::unique_ptr<OutputSink> separate_stderr_;
  OutputSink& stderr_;
  std::vector<Rank> ranks_;
  pid_t pgid_ = 0;  // 0 until rank 0 exists: setpgid(0, 0) makes rank 0 the group's leader
  Phase phase_ = Phase::Running;
  std::optional<Deadline> deadline_;
  std::optional<int> exit_code_;
  bool gave_up_ = false;
  bool stopped_by_signal_ = false;
};

}  // namespace

bool is_launcher_variable(const std::string& name) {
  static constexpr std::array kOwned = {"RANK",        "WORLD_SIZE",  "LOCAL_RANK",
                                        "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"};
  for (const char* owned : kOwned) {
    if (name == owned) return true;
  }
  return false;
}

namespace {

/// Refuses a job whose output pipes cannot all be open at once, before a rank starts: -n 100000 started about ten
/// thousand ranks before a pipe failed ("Too many open files"), and then had them all to stop.
void require_descriptors_for(int nproc) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return;
  // Two pipes per rank stay open in the launcher (stdout, stderr), a third while it starts; some for the rest.
  const std::uint64_t needed = 2ull * static_cast<std::uint64_t>(nproc) + 64;
  if (needed <= limit.rlim_cur) return;
  throw InvalidArgument(cat("launch: -n ", nproc, " needs about ", needed, " open files for the ranks' output, and "
                            "this process may open ", static_cast<std::uint64_t>(limit.rlim_cur),
                            " (ulimit -n); start fewer ranks or raise the limit"));
}

}  // namespace

int run(const LaunchOptions& options) {
  if (options.nproc < 1) throw InvalidArgument(cat("launch: -n ", options.nproc, " must be at least 1"));
  if (options.command.empty()) throw InvalidArgument("launch: no command to run");
  require_descriptors_for(options.nproc);
  Job job(options);
  return job.run();
}

int pick_free_port(const std::string& addr) {
  UniqueFd sock(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!sock.valid()) throw SystemError("launch: socket for picking MASTER_PORT", errno);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  bool loopback = addr == "localhost" || addr.starts_with("127.");
  sa.sin_addr.s_addr = htonl(loopback ? INADDR_LOOPBACK : INADDR_ANY);
  sa.sin_port = 0;
  if (::bind(sock.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    throw SystemError("launch: bind for picking MASTER_PORT", errno);
  }
  socklen_t len = sizeof sa;
  if (::getsockname(sock.get(), reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    throw SystemError("launch: getsockname for picking MASTER_PORT", errno);
  }
  return ntohs(sa.sin_port);
}

std::string random_token() {
  unsigned char bytes[16];
  std::size_t have = 0;
  while (have < sizeof bytes) {
    ssize_t n = ::getrandom(bytes + have, sizeof bytes - have, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw SystemError("launch: getrandom for PICKLE_TOKEN", errno);
    }
    have += static_cast<std::size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char b : bytes) {
    token += kHex[b >> 4];
    token += kHex[b & 15];
  }
  return token;
}

std::string resolve_program(const std::string& program, const std::string& path_list) {
  if (program.empty()) throw InvalidArgument("launch: the command is an empty string");
  if (program.find('/') != std::string::npos) return program;
  std::size_t start = 0;
  while (start <= path_list.size()) {
    std::size_t end = path_list.find(':', start);
    if (end == std::string::npos) end = path_list.size();
    std::string dir = path_list.substr(start, end - start);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + program;
    struct stat info {};
    if (::stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) && ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    start = end + 1;
  }
  throw InvalidArgument(cat("launch: '", program, "' was not found in PATH (", path_list, ")"));
}

}  // namespace pickle::launch
