#include "subprocess.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace pickle::test {

std::string self_exe() {
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n < 0) throw std::runtime_error("readlink /proc/self/exe failed");
  path[n] = '\0';
  return path;
}

std::map<std::string, ChildMain>& child_registry() {
  static std::map<std::string, ChildMain> registry;
  return registry;
}

std::string ExitStatus::describe() const {
  std::ostringstream out;
  if (timed_out) out << "still running at the deadline";
  else if (exited) out << "exited with code " << code;
  else out << "killed by signal " << signal << " (" << strsignal(signal) << ")";
  return out.str();
}

pid_t spawn_program(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                    const std::string& stdout_path, const std::string& stderr_path) {
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) environment.emplace_back(*e);
  for (const auto& entry : env) {
    auto key = entry.substr(0, entry.find('=') + 1);
    std::erase_if(environment, [&](const std::string& old) { return old.rfind(key, 0) == 0; });
    environment.push_back(entry);
  }
  std::vector<char*> c_argv, c_env;
  for (const auto& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
  c_argv.push_back(nullptr);
  for (const auto& e : environment) c_env.push_back(const_cast<char*>(e.c_str()));
  c_env.push_back(nullptr);

  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    if (!stdout_path.empty()) {
      int fd = open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) dup2(fd, 1);
    }
    if (!stderr_path.empty()) {
      int fd = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) dup2(fd, 2);
    }
    execve(c_argv[0], c_argv.data(), c_env.data());
    _exit(127);
  }
  return pid;
}

ExitStatus wait_pid(pid_t pid, std::chrono::milliseconds timeout) {
  ExitStatus status;
  auto end = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int raw = 0;
    pid_t got = waitpid(pid, &raw, WNOHANG);
    if (got == pid) {
      if (WIFEXITED(raw)) {
        status.exited = true;
        status.code = WEXITSTATUS(raw);
      } else if (WIFSIGNALED(raw)) {
        status.signal = WTERMSIG(raw);
      }
      return status;
    }
    if (got < 0) throw std::runtime_error("waitpid failed");
    if (std::chrono::steady_clock::now() >= end) {
      status.timed_out = true;
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

ExitStatus wait_pid_or_kill(pid_t pid, std::chrono::milliseconds timeout) {
  ExitStatus status = wait_pid(pid, timeout);
  if (status.timed_out) {
    ::kill(pid, SIGKILL);
    wait_pid(pid, std::chrono::seconds(5));
  }
  return status;
}

Child::Child(const std::string& child_name, std::vector<std::string> args, std::vector<std::string> env) {
  std::vector<std::string> argv = {self_exe(), "--pickle-child", child_name};
  argv.insert(argv.end(), args.begin(), args.end());
  pid_ = spawn_program(argv, env);
}

Child::Child(Child&& other) noexcept : pid_(other.pid_), reaped_(other.reaped_) { other.pid_ = -1; }

Child::~Child() {
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

ExitStatus Child::wait(std::chrono::milliseconds timeout) {
  ExitStatus status = wait_pid(pid_, timeout);
  if (!status.timed_out) reaped_ = true;
  return status;
}

void Child::kill(int signal) {
  if (pid_ > 0 && !reaped_) ::kill(pid_, signal);
}

namespace {

/// Whether a listening socket could bind 127.0.0.1:`port` now (`port` 0: any), and the port it got.
int try_bind_loopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  int got = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    socklen_t len = sizeof addr;
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    got = ntohs(addr.sin_port);
  }
  close(fd);
  return got;
}

/// The first port of the kernel's ephemeral range (ports it hands to bind(0) and to outgoing connections).
int ephemeral_range_start() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 32768;
  in >> low;
  return low;
}

}  // namespace

int free_tcp_port() {
  // Below the ephemeral range, at random: a port that bind(0) hands out is released again here before rank 0's store
  // binds it, and meanwhile the kernel may give it to another test's socket (ctest -j runs several), a store client's
  // or a transport's outgoing connection among them; a random port outside that range is taken by neither.
  thread_local std::mt19937 pick(std::random_device{}());
  const int top = std::min(ephemeral_range_start(), 65536);
  if (top > 20000) {
    std::uniform_int_distribution<int> port(10000, top - 1);
    for (int attempt = 0; attempt < 64; ++attempt) {
      const int candidate = port(pick);
      if (try_bind_loopback(candidate) == candidate) return candidate;
    }
  }
  const int any = try_bind_loopback(0);
  if (any < 0) throw std::runtime_error("bind failed");
  return any;
}

std::vector<std::string> rank_env(int rank, int world, int port) {
  return {"RANK=" + std::to_string(rank),       "WORLD_SIZE=" + std::to_string(world),
          "LOCAL_RANK=" + std::to_string(rank), "LOCAL_WORLD_SIZE=" + std::to_string(world),
          "MASTER_ADDR=127.0.0.1",              "MASTER_PORT=" + std::to_string(port)};
}

std::vector<ExitStatus> run_ranks(const std::string& name, int world, const std::vector<std::string>& args,
                                  const std::vector<std::string>& extra_env, std::chrono::milliseconds timeout) {
  const int port = free_tcp_port();
  std::vector<Child> ranks;
  for (int rank = 0; rank < world; ++rank) {
    auto env = rank_env(rank, world, port);
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    ranks.emplace_back(name, args, env);
  }
  auto end = std::chrono::steady_clock::now() + timeout;
  std::vector<ExitStatus> statuses;
  for (auto& child : ranks) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    statuses.push_back(child.wait(std::max(left, std::chrono::milliseconds(1))));
  }
  return statuses;
}

TempDir::TempDir(const std::string& tag) {
  std::string pattern = (std::filesystem::temp_directory_path() / ("pickle-" + tag + "-XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace pickle::test
