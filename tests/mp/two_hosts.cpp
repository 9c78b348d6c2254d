#include "two_hosts.hpp"

#include <algorithm>

namespace pickle::test {

std::vector<ExitStatus> run_on_two_hosts(const NetnsPair& pair, const std::vector<std::string>& program,
                                         TwoHostLayout layout, const std::vector<std::string>& env,
                                         std::chrono::seconds limit) {
  const int port = free_tcp_port();
  const bool mirrored = layout == TwoHostLayout::Mirrored;
  std::vector<pid_t> pids;
  for (int rank = 0; rank < 4; ++rank) {
    const int host = mirrored ? std::min(rank, 3 - rank) : rank / 2;
    const int local_rank = mirrored ? rank / 2 : rank % 2;
    std::vector<std::string> rank_env = {"RANK=" + std::to_string(rank), "WORLD_SIZE=4",
                                         "LOCAL_RANK=" + std::to_string(local_rank), "LOCAL_WORLD_SIZE=2",
                                         "MASTER_ADDR=" + pair.address(0), "MASTER_PORT=" + std::to_string(port),
                                         "PICKLE_NET_PROVIDER=tcp", "PICKLE_NET_IFACE=" + pair.iface(host)};
    rank_env.insert(rank_env.end(), env.begin(), env.end());
    std::vector<std::string> argv = {self_exe(), "--pickle-child"};
    argv.insert(argv.end(), program.begin(), program.end());
    pids.push_back(spawn_program(pair.exec_in(host, argv), rank_env));
  }
  std::vector<ExitStatus> statuses;
  for (pid_t pid : pids) statuses.push_back(wait_pid_or_kill(pid, limit));
  return statuses;
}

}  // namespace pickle::test
