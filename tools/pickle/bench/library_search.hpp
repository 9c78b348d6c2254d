#pragma once
// Where the NVIDIA libraries that `pickle bench` loads at run time (cuBLASLt, cuDNN, the CUDA runtime for cuDNN's
// frontend) may live: the loader's search path, the CUDA toolkit, and the lib folders of Python's nvidia wheels, which
// is where a machine with PyTorch has them without any system install.

#include <optional>
#include <string>
#include <vector>

#include "core/dynlib.hpp"

namespace pickle::bench {

/// Candidates in order: each of `sonames` as given (the loader's search path), then each in the CUDA toolkit's
/// lib64, then the files matching `file_glob` (e.g. "libcudnn.so.9*") in nvidia/<package>/lib for each of `packages`,
/// under the site-packages of the python3 on PATH, $VIRTUAL_ENV, $CONDA_PREFIX, /usr/local and /usr.
std::vector<std::string> nvidia_library_candidates(const std::vector<std::string>& sonames,
                                                   const std::vector<std::string>& packages,
                                                   const std::string& file_glob);

/// The first candidate that dlopen accepts, or nullopt with the first candidate's dlerror() in *first_error (the
/// soname's error is the one that explains a missing library best).
std::optional<DynamicLibrary> open_first(const std::vector<std::string>& candidates, std::string* first_error);

}  // namespace pickle::bench
