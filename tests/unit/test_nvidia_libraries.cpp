// Where `pickle bench` looks for the NVIDIA libraries it loads at run time (cuBLASLt, cuDNN, the CUDA runtime that
// cuDNN's frontend opens), and the cuDNN loader itself: loading a library needs no GPU, so this runs on any machine,
// and where libcudnn.so.9 is absent the test checks that the reason names what was tried.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <pickle/error.hpp>

#include "../../tools/pickle/bench/cudnn_library.hpp"
#include "../../tools/pickle/bench/library_search.hpp"
#include "subprocess.hpp"

namespace pickle {
namespace {

bool contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

TEST(NvidiaLibraries, CandidatesGoFromTheSonameToTheToolkitToPythonWheels) {
  test::TempDir venv("nvidia-libraries");
  const std::string lib = venv / "lib/python3.12/site-packages/nvidia/pickletest/lib";
  std::filesystem::create_directories(lib);
  std::ofstream(lib + "/libpickletest.so.9") << "";
  std::ofstream(lib + "/libother.so.9") << "";
  const char* saved = std::getenv("VIRTUAL_ENV");
  const std::string previous = saved != nullptr ? saved : "";
  setenv("VIRTUAL_ENV", venv.str().c_str(), 1);
  auto candidates = bench::nvidia_library_candidates({"libpickletest.so.9"}, {"pickletest"}, "libpickletest.so.9*");
  if (saved != nullptr) {
    setenv("VIRTUAL_ENV", previous.c_str(), 1);
  } else {
    unsetenv("VIRTUAL_ENV");
  }

  ASSERT_GE(candidates.size(), 4u);
  EXPECT_EQ(candidates[0], "libpickletest.so.9");  // the loader's own search path first (LD_LIBRARY_PATH, ldconfig)
  EXPECT_EQ(candidates[1], "/usr/local/cuda/lib64/libpickletest.so.9");
  EXPECT_TRUE(contains(candidates, lib + "/libpickletest.so.9"));
  EXPECT_FALSE(contains(candidates, lib + "/libother.so.9")) << "only files matching the pattern";
}

TEST(NvidiaLibraries, OpenFirstTakesTheFirstThatLoadsAndKeepsTheFirstError) {
  std::string error;
  auto library = bench::open_first({"/pickle/no/such/libx.so", "libc.so.6"}, &error);
  ASSERT_TRUE(library.has_value());
  EXPECT_NE(library->path().find("libc"), std::string::npos) << library->path();
  EXPECT_NE(error.find("/pickle/no/such/libx.so"), std::string::npos) << error;
  error.clear();
  EXPECT_FALSE(bench::open_first({"libpickle-none.so.1"}, &error).has_value());
  EXPECT_NE(error.find("libpickle-none.so.1"), std::string::npos) << error;
}

TEST(NvidiaLibraries, CudnnLoadsWithItsVersionOrSaysWhatWasTried) {
  try {
    const bench::CudnnLibrary& cudnn = bench::cudnn_library();
    EXPECT_NE(cudnn.handle, nullptr);
    EXPECT_NE(cudnn.path.find("libcudnn.so.9"), std::string::npos) << cudnn.path;
    EXPECT_TRUE(std::regex_match(cudnn.version, std::regex(R"(9\.[0-9]+\.[0-9]+)"))) << cudnn.version;
    EXPECT_EQ(&bench::cudnn_library(), &cudnn) << "loaded once per process";
  } catch (const UnavailableError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cannot load cuDNN"), std::string::npos) << what;
    EXPECT_NE(what.find("libcudnn.so.9"), std::string::npos) << what;
    GTEST_SKIP() << "no libcudnn.so.9 here: " << what;
  }
}

}  // namespace
}  // namespace pickle
