#pragma once
// libcudnn.so.9, loaded at run time for cuDNN's frontend (NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING), so that pickle
// builds and runs without cuDNN and says why when it is missing. The frontend resolves every backend call with
// dlsym on the handle it is given and caches the addresses in function-local statics, so the library is loaded once
// per process and never closed.

#include <string>

namespace pickle::bench {

struct CudnnLibrary {
  void* handle = nullptr;  ///< for cudnn_frontend::cudnn_dlhandle
  std::string path;        ///< the file the loader chose
  std::string version;     ///< "9.19.0", from cudnnGetVersion()
};

/// Loads libcudnn.so.9 on the first call (the loader's search path, /usr/local/cuda/lib64, then the lib folder of
/// Python's nvidia-cudnn wheel, as for cuBLASLt), together with the parts of cuDNN 9 that it opens by soname
/// (libcudnn_graph, _heuristic, _engines_*) from the same folder and the CUDA runtime libcudart.so.13 that the
/// frontend opens by soname: loaded first, a later dlopen of the soname finds them wherever they are. Throws
/// UnavailableError saying what was tried when libcudnn.so.9 does not load, on this and every later call.
const CudnnLibrary& cudnn_library();

}  // namespace pickle::bench
