# cuDNN's SDPA for the attention foreground, through NVIDIA's header-only cuDNN frontend in its dynamic-loading mode:
# nothing links cuDNN, so the binary still runs where it is absent (the own kernel then runs, or --attention cudnn
# says why not). Needs the frontend's headers (scripts/fetch-cudnn-frontend.sh puts them in .deps/cudnn-frontend;
# or -DPICKLE_CUDNN_FRONTEND_DIR=...) and cudnn.h 9 for its types (the CUDA toolkit's include folder, Python's
# nvidia-cudnn wheel, .deps/cudnn/include, or -DPICKLE_CUDNN_INCLUDE_DIR=...). Without either, the cuDNN path is left
# out of the build.
find_path(PICKLE_CUDNN_FRONTEND_DIR cudnn_frontend.h PATHS ${PROJECT_SOURCE_DIR}/.deps/cudnn-frontend/include
          NO_DEFAULT_PATH DOC "folder holding cudnn_frontend.h (the cuDNN frontend's include/)")
set(pickle_cudnn_hints ${CUDAToolkit_INCLUDE_DIRS})
find_package(Python3 QUIET COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  # Python's nvidia-cudnn wheels (what PyTorch installs) carry cudnn.h in nvidia/cudnn/include (CUDA 12 wheels) or
  # nvidia/cu13/include (CUDA 13 wheels).
  execute_process(COMMAND ${Python3_EXECUTABLE} -c "import site; print(';'.join(site.getsitepackages()))"
                  OUTPUT_VARIABLE pickle_site_packages OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  foreach(folder ${pickle_site_packages})
    file(GLOB pickle_wheel_cudnn ${folder}/nvidia/*/include/cudnn.h)
    foreach(header ${pickle_wheel_cudnn})
      get_filename_component(header_folder ${header} DIRECTORY)
      list(APPEND pickle_cudnn_hints ${header_folder})
    endforeach()
  endforeach()
endif()
# Last: headers carried from another machine (scripts/device/carry_cudnn_headers.sh).
list(APPEND pickle_cudnn_hints ${PROJECT_SOURCE_DIR}/.deps/cudnn/include)
find_path(PICKLE_CUDNN_INCLUDE_DIR cudnn.h HINTS ${pickle_cudnn_hints} DOC "folder holding cudnn.h (cuDNN 9)")

set(pickle_cudnn_missing "")
if(NOT PICKLE_CUDNN_FRONTEND_DIR)
  set(pickle_cudnn_missing "no cudnn_frontend.h (run scripts/fetch-cudnn-frontend.sh or set PICKLE_CUDNN_FRONTEND_DIR)")
elseif(NOT PICKLE_CUDNN_INCLUDE_DIR)
  set(pickle_cudnn_missing "no cudnn.h (set PICKLE_CUDNN_INCLUDE_DIR to cuDNN 9's include folder)")
else()
  set(pickle_cudnn_version_header ${PICKLE_CUDNN_INCLUDE_DIR}/cudnn_version.h)
  if(NOT EXISTS ${pickle_cudnn_version_header})
    set(pickle_cudnn_version_header ${PICKLE_CUDNN_INCLUDE_DIR}/cudnn.h)
  endif()
  file(STRINGS ${pickle_cudnn_version_header} pickle_cudnn_major REGEX "^#define CUDNN_MAJOR [0-9]+")
  string(REGEX REPLACE "^#define CUDNN_MAJOR ([0-9]+).*" "\\1" pickle_cudnn_major "${pickle_cudnn_major}")
  if(NOT pickle_cudnn_major STREQUAL "9")
    set(pickle_cudnn_missing "${PICKLE_CUDNN_INCLUDE_DIR}/cudnn.h is cuDNN '${pickle_cudnn_major}', not 9")
  endif()
endif()

if(pickle_cudnn_missing)
  message(STATUS "pickle: attention foreground without cuDNN SDPA: ${pickle_cudnn_missing}")
else()
  message(STATUS "pickle: attention foreground with cuDNN SDPA (frontend ${PICKLE_CUDNN_FRONTEND_DIR}, "
                 "cudnn.h ${PICKLE_CUDNN_INCLUDE_DIR})")
  # One translation unit includes the frontend (large, header-only), as an object library of its own so that its
  # include folders are SYSTEM (third-party headers do not trip -Werror) and its defines reach no other file.
  add_library(pickle_attention_cudnn OBJECT interference_attention_cudnn.cpp)
  target_include_directories(pickle_attention_cudnn SYSTEM PRIVATE ${PICKLE_CUDNN_FRONTEND_DIR}
                             ${PICKLE_CUDNN_INCLUDE_DIR})
  target_compile_definitions(pickle_attention_cudnn PRIVATE NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING
                             CUDNN_FRONTEND_SKIP_JSON_LIB PICKLE_HAVE_CUDNN_FRONTEND=1)
  target_link_libraries(pickle_attention_cudnn PRIVATE pickle_internal)
  pickle_warnings(pickle_attention_cudnn)
  target_sources(pickle_cli PRIVATE $<TARGET_OBJECTS:pickle_attention_cudnn> cudnn_library.cpp)
  target_compile_definitions(pickle_cli PRIVATE PICKLE_HAVE_CUDNN_FRONTEND=1)
endif()
