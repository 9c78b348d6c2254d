#pragma once
// Pieces of rank discovery that tests reach directly: Slurm's compressed host and task lists, and the port that
// ranks derive from a job id when the launcher gives no MASTER_PORT.

#include <string>
#include <string_view>
#include <vector>

namespace pickle::bootstrap {

/// Expands a Slurm host list ("node[01-03,07],login1", "rack[1-2]-gpu[1-2]") in order. A malformed list, or one
/// expanding to more than max_hosts names, is an InvalidArgument naming `variable`.
std::vector<std::string> expand_slurm_nodelist(std::string_view list, std::string_view variable,
                                               std::size_t max_hosts = 65536);

/// Expands SLURM_TASKS_PER_NODE's form "2(x3),1" into one count per node: {2, 2, 2, 1}.
std::vector<int> parse_slurm_tasks_per_node(std::string_view value, std::string_view variable);

/// A port in [20000, 30000) derived from the job id by a fixed hash: below Linux's ephemeral range, so that it
/// does not collide with the source ports of outgoing connections.
int port_from_job_id(std::string_view job_id);

/// Parses a decimal integer in [min, max]; anything else is an InvalidArgument naming `variable`.
int parse_int_var(std::string_view variable, std::string_view value, int min, int max);

}  // namespace pickle::bootstrap
