// The dlopen wrapper that NVML, NCCL and libfabric are loaded through, tried on libraries every Linux host has.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <utility>

#include <pickle/error.hpp>

#include "core/dynlib.hpp"

namespace pickle {
namespace {

TEST(DynamicLibrary, CallsAFunctionFromALoadedLibrary) {
  DynamicLibrary libc = DynamicLibrary::open("libc.so.6");
  auto string_length = libc.symbol<std::size_t(const char*)>("strlen");
  EXPECT_EQ(string_length("pickle"), 6u);
  EXPECT_EQ(libc.name(), "libc.so.6");
  EXPECT_NE(libc.path().find("libc"), std::string::npos) << libc.path();
  EXPECT_EQ(libc.path().front(), '/') << libc.path();  // the file the loader chose, not the soname
}

TEST(DynamicLibrary, MissingSymbols) {
  DynamicLibrary libm = DynamicLibrary::open("libm.so.6");
  EXPECT_EQ(libm.find<double(double)>("pickle_no_such_function"), nullptr);
  EXPECT_NE(libm.find<double(double)>("cos"), nullptr);
  try {
    libm.symbol<double(double)>("pickle_no_such_function");
    FAIL() << "found a symbol that does not exist";
  } catch (const UnavailableError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("libm.so.6"), std::string::npos) << what;
    EXPECT_NE(what.find("pickle_no_such_function"), std::string::npos) << what;
  }
}

TEST(DynamicLibrary, MissingLibrary) {
  std::string error;
  EXPECT_FALSE(DynamicLibrary::try_open("libpickle-does-not-exist.so.9", &error));
  EXPECT_NE(error.find("libpickle-does-not-exist.so.9"), std::string::npos) << error;
  EXPECT_FALSE(DynamicLibrary::try_open("libpickle-does-not-exist.so.9"));
  try {
    DynamicLibrary::open("libpickle-does-not-exist.so.9");
    FAIL() << "opened a library that does not exist";
  } catch (const UnavailableError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot load libpickle-does-not-exist.so.9"), std::string::npos) << e.what();
  }
}

TEST(DynamicLibrary, MovesOwnership) {
  DynamicLibrary first = DynamicLibrary::open("libc.so.6");
  DynamicLibrary second = std::move(first);
  EXPECT_EQ(second.symbol<std::size_t(const char*)>("strlen")("abc"), 3u);
  // The moved-from handle is closed: looking a symbol up there is a bug, reported instead of searching the process.
  EXPECT_THROW(first.symbol<std::size_t(const char*)>("strlen"), Error);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(first.find<std::size_t(const char*)>("strlen"), nullptr);     // NOLINT(bugprone-use-after-move)
  DynamicLibrary third = DynamicLibrary::open("libm.so.6");
  third = std::move(second);
  EXPECT_EQ(third.name(), "libc.so.6");
}

}  // namespace
}  // namespace pickle
