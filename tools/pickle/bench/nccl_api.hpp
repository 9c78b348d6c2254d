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

/// ncclConfig_t as NCCL 2.28 lays it out (fields are only ever appended; NCCL reads as many as the `version` it is
/// given says exist). Filled by NcclApi::default_config() the way NCCL_CONFIG_INITIALIZER fills it.
struct NcclConfig {
  std::size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;  ///< NCCL >= 2.27
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
};
inline constexpr int kNcclCtaPolicyZero = 0x02;     ///< NCCL_CTA_POLICY_ZERO
inline constexpr int kNcclWinCollSymmetric = 0x01;  ///< NCCL_WIN_COLL_SYMMETRIC
using NcclWindow = void*;                           ///< ncclWindow_t

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
  // NCCL's zero-SM mode ("nccl-zero"): a communicator configured with CTAPolicy = NCCL_CTA_POLICY_ZERO and buffers
  // from ncclMemAlloc registered as symmetric windows. Null where the library predates them.
  int (*comm_init_rank_config)(NcclComm*, int nranks, NcclUniqueId id, int rank, NcclConfig* config) = nullptr;
  int (*mem_alloc)(void** ptr, std::size_t size) = nullptr;
  int (*mem_free)(void* ptr) = nullptr;
  int (*comm_window_register)(NcclComm, void* buffer, std::size_t size, NcclWindow* window, int flags) = nullptr;
  int (*comm_window_deregister)(NcclComm, NcclWindow window) = nullptr;

  /// Why this library cannot run NCCL's zero-SM mode ("" when it can): NCCL 2.27 or newer with every call above.
  std::string zero_cta_problem() const;
  /// A configuration as NCCL_CONFIG_INITIALIZER makes it (every attribute "undefined") for this library's version.
  NcclConfig default_config() const;

 private:
  explicit NcclApi(DynamicLibrary library) : library_(std::move(library)) {}

  DynamicLibrary library_;
  std::string version_;
  int version_code_ = 0;  // ncclGetVersion's
  const char* (*get_error_string_)(int) = nullptr;
  const char* (*get_last_error_)(NcclComm) = nullptr;  // NCCL >= 2.13; null before
};

}  // namespace pickle::bench
