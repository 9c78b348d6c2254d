// Test main: `--pickle-child NAME args...` runs a registered child function (a rank of a multi-process test);
// anything else runs GoogleTest.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <exception>

#include "subprocess.hpp"

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "--pickle-child") == 0) {
    auto& registry = pickle::test::child_registry();
    auto it = registry.find(argv[2]);
    if (it == registry.end()) {
      std::fprintf(stderr, "unknown child function '%s'\n", argv[2]);
      return 127;
    }
    std::vector<std::string> args(argv + 3, argv + argc);
    try {
      return it->second(args);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child %s failed: %s\n", argv[2], e.what());
      return 99;
    }
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
