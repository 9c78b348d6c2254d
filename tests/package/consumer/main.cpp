// A program outside the pickle tree: it must compile against the installed headers and link libpickle.
#include <pickle/pickle.hpp>

#include <cstdio>
#include <string_view>

int main() {
  // Touch the library (not only the headers) so that a missing or broken libpickle fails to link or load.
  const char* name = pickle::error_code_name(pickle::ErrorCode::Timeout);
  if (std::string_view(name) != "Timeout") return 1;
  std::printf("consumer linked pickle %s\n", PICKLE_VERSION_STRING);
  return 0;
}
