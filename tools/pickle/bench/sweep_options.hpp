#pragma once
// The command-line flags that every `pickle bench` suite shares: nccl-tests' -b/-e/-f/-n/-w, --memory, --json and
// --help, with their ranges and messages in one place. A suite's options derive from SweepOptions, and its parser
// hands each flag to parse_sweep_flag first and reads only its own flags itself.

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pickle::bench {

/// The shared flags. Suites set their own defaults for -f, -n and -w (see the suites' option structs).
struct SweepOptions {
  std::size_t min_bytes = 4096;  ///< -b
  std::size_t max_bytes = 0;     ///< -e; 0: the suite's default for the memory kind (sweep_max_bytes)
  std::size_t factor = 2;        ///< -f
  int iterations = 20;           ///< -n: timed iterations per size (each suite's usage says what one is)
  int warmup = 5;                ///< -w: untimed iterations before each size
  /// The least -w the suite runs with: 1 where it times pickle's p2p (kP2pWarmupWhy says why), set before parsing.
  int min_warmup = 0;
  std::string memory{};          ///< --memory: "host", "cuda" or "" (cuda when rank 0 sees 2 GPUs or more)
  std::string json_path{};       ///< --json
  bool help = false;             ///< -h, --help
  bool min_given = false;        ///< -b was on the command line (settle_sweep_range tells the two cases apart)
};

/// Walks a suite's arguments one flag at a time.
class FlagReader {
 public:
  explicit FlagReader(const std::vector<std::string>& args) : args_(args) {}

  /// Moves to the next flag; false once past the last argument.
  bool next();
  /// The current flag.
  const std::string& flag() const { return args_[index_]; }
  /// Consumes and returns the argument after the current flag; "<flag> needs a value" when there is none.
  const std::string& value();
  /// value() for a flag that names a file to write: an empty name is "<flag> needs a file name" (a run with
  /// `--json ''` used to write nothing and exit 0).
  const std::string& file_value();
  /// Throws "unknown option '<flag>'" for the current flag.
  [[noreturn]] void unknown() const;

 private:
  const std::vector<std::string>& args_;
  std::size_t index_ = 0;
  bool started_ = false;
};

/// When `in`'s current flag is a shared one, reads it (and its value) into `sweep` and returns true; false for any
/// other flag. -n accepts 1 .. `max_count`, -w sweep.min_warmup .. `max_count`. Bad values are InvalidArgument naming
/// the flag (with kP2pWarmupWhy where -w must be 1 or more).
bool parse_sweep_flag(FlagReader& in, SweepOptions& sweep, long long max_count);

/// After the whole command line (and the suite's own checks): -b above -e is an InvalidArgument when both were given;
/// only -e below the default -b lowers -b to it (one size).
void settle_sweep_range(SweepOptions& sweep);

/// Why suites that time pickle's p2p need a warm-up: the first transfer into a buffer maps it, which the timed
/// repeats must not include (a run that maps memory while timed fails).
inline constexpr const char* kP2pWarmupWhy =
    "at least one warm-up iteration per size is needed (the first transfer into a buffer maps it, which the timed "
    "repeats must not include)";
/// Reads -w's value `text` into sweep.warmup: sweep.min_warmup .. `max_count`, else InvalidArgument (with
/// kP2pWarmupWhy where min_warmup is 1). parse_sweep_flag's; a suite that learns only after the whole command line
/// whether it times p2p (transports: --ops) calls it then.
void parse_warmup(const std::string& text, SweepOptions& sweep, long long max_count);

/// -e, or `default_max` (the suite's default for the memory kind) when -e was not given; never below -b.
std::size_t sweep_max_bytes(const SweepOptions& sweep, std::size_t default_max);

/// An integer flag value in [min, max]; anything else is an InvalidArgument naming `flag`.
long long parse_int(const std::string& text, const std::string& flag, long long min, long long max);
/// "a,b,c" -> {"a", "b", "c"}; empty or repeated items are an InvalidArgument naming `flag`.
std::vector<std::string> split_list(const std::string& text, const std::string& flag);
/// One of `choices`; anything else is an InvalidArgument "<flag>: unknown value 'x' (choose from a, b)".
std::size_t parse_choice(const std::string& text, const std::string& flag, std::span<const std::string_view> choices);
/// A split_list of `choices`, in the order given; an unknown item is an InvalidArgument naming it and the choices.
std::vector<std::string> parse_choice_list(const std::string& text, const std::string& flag,
                                           std::span<const std::string_view> choices);

}  // namespace pickle::bench
