#pragma once
// Four ranks on two "hosts" (the two network namespaces of a NetnsPair, two rank processes in each), for the tests of
// the collectives that go in two levels across hosts.

#include <chrono>
#include <string>
#include <vector>

#include "netns_pair.hpp"
#include "subprocess.hpp"

namespace pickle::test {

/// How the four ranks sit on the two hosts: blocked, 0 1 | 2 3; mirrored, 0 3 | 1 2 (the ranks of index 1 on their
/// hosts, 3 and 2, are then not in host order).
enum class TwoHostLayout { Blocked, Mirrored };

/// Runs the rank program `program` (a --pickle-child name and its args) as ranks 0-3 over the pair's link (net over
/// tcp between the hosts), with `env` added; waits for every rank, killing any still running after `limit`.
std::vector<ExitStatus> run_on_two_hosts(const NetnsPair& pair, const std::vector<std::string>& program,
                                         TwoHostLayout layout, const std::vector<std::string>& env,
                                         std::chrono::seconds limit);

}  // namespace pickle::test
