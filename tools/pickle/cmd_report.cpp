// `pickle report [-o DIR] FILE...`: plots and a Markdown report from `pickle bench --json` result files. The work is
// done by the Python script in tools/report (matplotlib); this command finds the script and a Python that can import
// matplotlib, and runs it. Reading and checking the JSON is the script's job, so that it is written once.
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <pickle/error.hpp>

#include "commands.hpp"
#include "core/env.hpp"
#include "core/format.hpp"
#include "core/unique_fd.hpp"
#include "launcher.hpp"

extern char** environ;

namespace pickle::cli {
namespace {

constexpr const char* kUsage =
    "usage: pickle report [-o DIR] FILE...\n"
    "\n"
    "Turns result files of `pickle bench --json` into PNG plots (bandwidth and latency vs message size, pickle's\n"
    "speed-up per size) and DIR/report.md: the recorded command, date, machine and versions of each run, and per\n"
    "mode a table in the seeds' shape (Size | pickle | NCCL | ratio | CE | ratio | #wrong) with the plots.\n"
    "\n"
    "options:\n"
    "  -o, --output DIR   folder for report.md and the plots (created; default: report)\n"
    "  -h, --help         show this text\n"
    "\n"
    "Needs a Python 3 with matplotlib: PICKLE_PYTHON, else python3 on PATH, else /usr/bin/python3\n"
    "(Debian: apt-get install python3-matplotlib). Exit codes: 0 written, 1 failure, 2 bad command line.\n";

/// The script tells us "this Python has no matplotlib" with this status, so that the next candidate is tried.
constexpr int kNoMatplotlibStatus = 3;
/// The script's exit status for a failure it has said on stderr: nothing to add (plain 1 stays for a Python that
/// failed before the script ran, or a traceback).
constexpr int kSaidFailureStatus = 4;

struct UsageError {
  std::string message;
};

struct ReportArgs {
  std::string output = "report";
  std::vector<std::string> files;
};

ReportArgs parse(const Args& args) {
  ReportArgs parsed;
  bool options_done = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (!options_done && arg == "--") {
      options_done = true;
    } else if (!options_done && (arg == "-o" || arg == "--output")) {
      if (i + 1 >= args.size()) throw UsageError{cat(arg, " needs a folder")};
      parsed.output = args[++i];
      if (parsed.output.empty()) throw UsageError{cat(arg, " needs a folder, not an empty string")};
    } else if (!options_done && arg.starts_with("--output=")) {
      parsed.output = arg.substr(9);
      if (parsed.output.empty()) throw UsageError{"--output= needs a folder, not an empty string"};
    } else if (!options_done && arg.size() > 1 && arg[0] == '-') {
      throw UsageError{cat("unknown option '", arg, "'")};
    } else {
      parsed.files.push_back(arg);
    }
  }
  if (parsed.files.empty()) throw UsageError{"no input files: give one or more result files of `pickle bench --json`"};
  return parsed;
}

bool is_regular_file(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

std::string directory_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

/// The folder of the running binary, from /proc/self/exe (the installed layout is relative to it).
std::optional<std::string> binary_dir() {
  char buffer[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n <= 0) return std::nullopt;
  return directory_of(std::string(buffer, static_cast<std::size_t>(n)));
}

/// report.py: installed next to the binary (<prefix>/bin/../share/pickle/report) first, so that an installed pickle
/// runs its own copy; else the source tree this binary was built from.
std::string find_script() {
  std::vector<std::string> tried;
  if (auto dir = binary_dir()) tried.push_back(*dir + "/../share/pickle/report/report.py");
  tried.push_back(std::string(PICKLE_SOURCE_DIR) + "/tools/report/report.py");
  for (const auto& path : tried) {
    if (is_regular_file(path)) return path;
  }
  std::string list;
  for (const auto& path : tried) list += cat(list.empty() ? "" : ", ", path);
  throw UnavailableError(cat("the report script was not found (looked for ", list,
                             "); reinstall pickle or run it from its build tree"));
}

/// Pythons to try, in order, without duplicates (python3 on PATH is often /usr/bin/python3 itself).
std::vector<std::string> python_candidates() {
  const std::string path_list = env::foreign("PATH").value_or("/usr/bin:/bin");
  if (auto chosen = env::get_if_set("PICKLE_PYTHON")) {
    try {
      return {launch::resolve_program(*chosen, path_list)};
    } catch (const Error&) {
      throw UnavailableError(cat("PICKLE_PYTHON=", *chosen, " was not found in PATH (", path_list, ")"));
    }
  }
  std::vector<std::string> candidates;
  try {
    candidates.push_back(launch::resolve_program("python3", path_list));
  } catch (const Error&) {
    // No python3 on PATH: the Debian location below may still have one.
  }
  candidates.emplace_back("/usr/bin/python3");
  std::vector<std::string> unique;
  std::vector<std::string> seen;
  for (const auto& candidate : candidates) {
    char resolved[PATH_MAX];
    std::string key = ::realpath(candidate.c_str(), resolved) != nullptr ? std::string(resolved) : candidate;
    bool duplicate = false;
    for (const auto& s : seen) duplicate |= (s == key);
    if (duplicate) continue;
    seen.push_back(key);
    unique.push_back(candidate);
  }
  return unique;
}

/// Starts `argv` with our stdio and environment and waits for it. Returns the wait status, or nullopt with
/// `why_not` set when the program could not be started at all.
///
/// The wait has no deadline on purpose: the child is a local computation whose run time grows with the input (not a
/// peer that may vanish), and it shares our process group, so Ctrl-C ends both.
std::optional<int> run_program(const std::vector<std::string>& argv, std::string& why_not) {
  std::vector<char*> pointers;
  pointers.reserve(argv.size() + 1);
  for (const auto& a : argv) pointers.push_back(const_cast<char*>(a.c_str()));
  pointers.push_back(nullptr);
  pid_t pid = -1;
  // posix_spawn rather than fork: nothing runs in the child between fork and exec, and glibc reports a failed exec
  // (missing file, not executable) through the return value.
  int rc = ::posix_spawn(&pid, argv.front().c_str(), nullptr, nullptr, pointers.data(), environ);
  if (rc != 0) {
    why_not = std::strerror(rc);
    return std::nullopt;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw SystemError(cat("waiting for ", argv.front(), " (pid ", pid, ")"), errno);
  }
  return status;
}

}  // namespace

int cmd_report(const Args& args) {
  for (const auto& arg : args) {
    if (arg == "--") break;
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  ReportArgs parsed;
  try {
    parsed = parse(args);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "pickle report: %s\n\n%s", e.message.c_str(), kUsage);
    return 2;
  }
  // Unreadable inputs fail here, before a Python is even looked for; their contents are the script's to judge.
  for (const auto& file : parsed.files) {
    // O_NONBLOCK: opening a FIFO would wait for a writer (found by review); it is refused below as no regular file.
    UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (!fd) throw SystemError(cat("cannot read the result file ", file), errno);
    if (!is_regular_file(file)) throw InvalidArgument(cat(file, " is not a regular file"));
  }

  const std::string script = find_script();
  std::vector<std::string> tried;
  for (const auto& python : python_candidates()) {
    std::vector<std::string> argv = {python, "-B", script, "--missing-matplotlib-status",
                                     std::to_string(kNoMatplotlibStatus), "--said-failure-status",
                                     std::to_string(kSaidFailureStatus), "-o", parsed.output, "--"};
    argv.insert(argv.end(), parsed.files.begin(), parsed.files.end());
    std::string why_not;
    auto status = run_program(argv, why_not);
    if (!status) {
      tried.push_back(cat(python, " (", why_not, ")"));
      continue;
    }
    if (WIFSIGNALED(*status)) {
      int sig = WTERMSIG(*status);
      throw Error(ErrorCode::System,
                  cat(python, " ", script, " was killed by signal ", sig, " (", ::strsignal(sig), ")"));
    }
    int code = WEXITSTATUS(*status);
    if (code == kNoMatplotlibStatus) {
      tried.push_back(cat(python, " (no matplotlib)"));
      continue;
    }
    // The script has said what went wrong on stderr; 0, 1 and 2 keep their meaning, anything else is a failure.
    // A success that wrote no report.md was not our script (PICKLE_PYTHON pointing at something else).
    if (code == 0 && !is_regular_file(parsed.output + "/report.md")) {
      throw Error(ErrorCode::System, cat(python, " ", script, " exited 0 but wrote no ", parsed.output,
                                         "/report.md (is it a Python? PICKLE_PYTHON chooses it)"));
    }
    if (code == kSaidFailureStatus) return 1;
    // Said here as well: a Python that failed before the script ran (PICKLE_PYTHON=/bin/false) said nothing.
    if (code != 0) {
      std::fprintf(stderr, "pickle report: %s %s exited with status %d\n", python.c_str(), script.c_str(), code);
    }
    return code == 0 || code == 2 ? code : 1;
  }
  std::string list;
  for (const auto& t : tried) list += cat(list.empty() ? "" : ", ", t);
  throw UnavailableError(cat("no Python that can import matplotlib: tried ", list,
                             ". Install it (apt-get install python3-matplotlib) or set PICKLE_PYTHON to a Python "
                             "that has it"));
}

}  // namespace pickle::cli
