#pragma once
// The part of NCCL's C API that the benchmark calls, loaded from libnccl.so.2 at run time (no NCCL headers or
// library are needed to build pickle). The declarations follow nccl.h; every type crosses as the same ABI:
// ncclResult_t and ncclDataType_t are C enums (int), ncclComm_t and cudaStream_t are pointers, ncclUniqueId is a
// 128-byte struct passed by value.

#include <cstddef>
#include <string>

#include "core/dynlib.hpp"

namespace pickle::bench {

/// ncclUniqueId: NCCL_UNIQUE_ID_BYTES = 128.
struct NcclUniqueId {
  char internal[128];
};
using NcclComm = void*;  ///< ncclComm_t

/// ncclInt8 (= ncclChar): counts are bytes.
inline constexpr int kNcclInt8 = 0;

class NcclApi {
 public:
  /// Loads libnccl.so.2 and resolves every symbol; UnavailableError saying what is missing otherwise.
  static NcclApi load();

  /// "2.28.9"
  const std::string& version() const { return version_; }
  /// The file the loader chose.
  std::string path() const { return library_.path(); }

  /// Throws Error(Nccl) naming `call` and `what` (rank, peer, op, size) when `result` is not ncclSuccess.
  void check(int result, const char* call, const std::string& what, NcclComm comm = nullptr) const;

  int (*get_unique_id)(NcclUniqueId*) = nullptr;
  int (*comm_init_rank)(NcclComm*, int nranks, NcclUniqueId id, int rank) = nullptr;
  int (*comm_destroy)(NcclComm) = nullptr;
  int (*comm_abort)(NcclComm) = nullptr;
  int (*send)(const void* buffer, std::size_t count, int datatype, int peer, NcclComm, void* stream) = nullptr;
  int (*recv)(void* buffer, std::size_t count, int datatype, int peer, NcclComm, void* stream) = nullptr;
  int (*group_start)() = nullptr;
  int (*group_end)() = nullptr;

 private:
  explicit NcclApi(DynamicLibrary library) : library_(std::move(library)) {}

  DynamicLibrary library_;
  std::string version_;
  const char* (*get_error_string_)(int) = nullptr;
  const char* (*get_last_error_)(NcclComm) = nullptr;  // NCCL >= 2.13; null before
};

}  // namespace pickle::bench
