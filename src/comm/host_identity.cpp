#include "comm/host_identity.hpp"

#include <unistd.h>

#include <fstream>

#include "core/format.hpp"

namespace pickle::comm {
namespace {

std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string link_target(const char* path) {
  char target[256] = {};
  const ssize_t n = ::readlink(path, target, sizeof target - 1);
  return n > 0 ? std::string(target, static_cast<std::size_t>(n)) : std::string("?");
}

}  // namespace

std::string host_identity() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) name[0] = '\0';
  // The boot id tells two machines with the same hostname apart (cloned images); the namespace link, e.g.
  // "net:[4026531840]", two network namespaces of one machine.
  return cat(name, " boot ", first_line("/proc/sys/kernel/random/boot_id"), " netns ", link_target("/proc/self/ns/net"));
}

}  // namespace pickle::comm
