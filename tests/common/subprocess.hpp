#pragma once
// Multi-process tests without MPI: a test binary starts copies of itself as real child processes (fork+exec),
// each running a named child function registered with PICKLE_CHILD. A watchdog deadline bounds every wait.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace pickle::test {

using ChildMain = std::function<int(const std::vector<std::string>& args)>;

/// Registry of child entry points, filled by PICKLE_CHILD at static-initialisation time.
std::map<std::string, ChildMain>& child_registry();

struct ChildRegistrar {
  ChildRegistrar(const char* name, ChildMain main) { child_registry()[name] = std::move(main); }
};

/// How a child ended: exit code, or the signal that killed it (or -1 when still running after the deadline).
struct ExitStatus {
  bool exited = false;
  int code = -1;
  int signal = 0;
  bool timed_out = false;
  bool ok() const { return exited && code == 0; }
  std::string describe() const;
};

/// A child process running `child_name` of this same binary. Killed (SIGKILL) and reaped on destruction.
class Child {
 public:
  Child(const std::string& child_name, std::vector<std::string> args = {}, std::vector<std::string> env = {});
  Child(Child&& other) noexcept;
  Child& operator=(Child&&) = delete;
  Child(const Child&) = delete;
  ~Child();

  pid_t pid() const { return pid_; }
  ExitStatus wait(std::chrono::milliseconds timeout = std::chrono::seconds(60));
  void kill(int signal);

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
};

/// Starts a program (not a child function): used to run the `pickle` command in tests.
pid_t spawn_program(const std::vector<std::string>& argv, const std::vector<std::string>& env = {},
                    const std::string& stdout_path = "", const std::string& stderr_path = "");
ExitStatus wait_pid(pid_t pid, std::chrono::milliseconds timeout);
/// wait_pid, and a process still running at the timeout is SIGKILLed and reaped (the status says it timed out).
ExitStatus wait_pid_or_kill(pid_t pid, std::chrono::milliseconds timeout);

/// A free TCP port on 127.0.0.1: a random one below the kernel's ephemeral range that binds now (released again),
/// so that no other socket of a test running beside this one is handed it meanwhile; bind(0)'s if none is found.
int free_tcp_port();

/// Environment entries for rank `rank` of `world` with the store at 127.0.0.1:port (torchrun variables).
std::vector<std::string> rank_env(int rank, int world, int port);

/// Starts `world` ranks of child `name` with torchrun variables for a store on a fresh port (plus `extra_env`),
/// waits for all of them and returns their statuses in rank order.
std::vector<ExitStatus> run_ranks(const std::string& name, int world, const std::vector<std::string>& args = {},
                                  const std::vector<std::string>& extra_env = {},
                                  std::chrono::milliseconds timeout = std::chrono::seconds(60));

/// A scratch directory for one test (under $TMPDIR, named pickle-<tag>-XXXXXX), removed with its contents afterwards.
class TempDir {
 public:
  explicit TempDir(const std::string& tag = "test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  const std::string& str() const { return path_; }

 private:
  std::string path_;
};

/// The path of the running test binary.
std::string self_exe();

/// Reads a whole file.
std::string read_file(const std::string& path);

}  // namespace pickle::test

#define PICKLE_CHILD_CONCAT2(a, b) a##b
#define PICKLE_CHILD_CONCAT(a, b) PICKLE_CHILD_CONCAT2(a, b)
/// PICKLE_CHILD(name) { ... return 0; }  defines a child entry point; `args` holds its arguments.
#define PICKLE_CHILD(name)                                                                         \
  static int pickle_child_##name(const std::vector<std::string>& args);                            \
  static ::pickle::test::ChildRegistrar PICKLE_CHILD_CONCAT(pickle_child_registrar_, name)(#name, \
                                                                                          pickle_child_##name); \
  static int pickle_child_##name([[maybe_unused]] const std::vector<std::string>& args)
