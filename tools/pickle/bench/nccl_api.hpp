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

/// ncclDataType_t values, as nccl.h numbers them (ncclInt8 = ncclChar: counts are bytes).
inline constexpr int kNcclInt8 = 0;
inline constexpr int kNcclUint8 = 1;
inline constexpr int kNcclInt32 = 2;
inline constexpr int kNcclUint32 = 3;
inline constexpr int kNcclInt64 = 4;
inline constexpr int kNcclUint64 = 5;
inline constexpr int kNcclFloat16 = 6;
inline constexpr int kNcclFloat32 = 7;
inline constexpr int kNcclFloat64 = 8;
inline constexpr int kNcclBfloat16 = 9;
/// ncclRedOp_t values (nccl.h): note that max comes before min, unlike pickle::ReduceOp.
inline constexpr int kNcclSum = 0;
inline constexpr int kNcclProd = 1;
inline constexpr int kNcclMax = 2;
inline constexpr int kNcclMin = 3;
inline constexpr int kNcclAvg = 4;  ///< NCCL >= 2.10

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
  // Collectives: (send, recv, count, datatype, [op | root,] comm, stream); counts as in nccl.h.
  int (*all_reduce)(const void*, void*, std::size_t count, int datatype, int op, NcclComm, void* stream) = nullptr;
  int (*all_gather)(const void*, void*, std::size_t sendcount, int datatype, NcclComm, void* stream) = nullptr;
  int (*broadcast)(const void*, void*, std::size_t count, int datatype, int root, NcclComm, void* stream) = nullptr;
  int (*reduce_scatter)(const void*, void*, std::size_t recvcount, int datatype, int op, NcclComm,
                        void* stream) = nullptr;
  /// ncclAlltoAll (NCCL >= 2.28); null before, where alltoall is a group of ncclSend/ncclRecv as nccl-tests does it.
  int (*all_to_all)(const void*, void*, std::size_t count, int datatype, NcclComm, void* stream) = nullptr;

 private:
  explicit NcclApi(DynamicLibrary library) : library_(std::move(library)) {}

  DynamicLibrary library_;
  std::string version_;
  const char* (*get_error_string_)(int) = nullptr;
  const char* (*get_last_error_)(NcclComm) = nullptr;  // NCCL >= 2.13; null before
};

}  // namespace pickle::bench
