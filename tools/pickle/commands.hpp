#pragma once
// The subcommands of the `pickle` command. Each takes the arguments after its name and returns the exit code.

#include <string>
#include <vector>

namespace pickle::cli {

using Args = std::vector<std::string>;

int cmd_version(const Args& args);
int cmd_selftest(const Args& args);
int cmd_info(const Args& args);
int cmd_launch(const Args& args);
int cmd_bench(const Args& args);
int cmd_report(const Args& args);

}  // namespace pickle::cli
