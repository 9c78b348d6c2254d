#include "nccl_api.hpp"

#include <algorithm>
#include <climits>
#include <utility>

#include <pickle/error.hpp>

#include "core/format.hpp"

namespace pickle::bench {

NcclApi NcclApi::load() {
  NcclApi api(DynamicLibrary::open("libnccl.so.2"));
  const DynamicLibrary& lib = api.library_;
  auto get_version = lib.symbol<int(int*)>("ncclGetVersion");
  api.get_unique_id = lib.symbol<int(NcclUniqueId*)>("ncclGetUniqueId");
  api.comm_init_rank = lib.symbol<int(NcclComm*, int, NcclUniqueId, int)>("ncclCommInitRank");
  api.comm_destroy = lib.symbol<int(NcclComm)>("ncclCommDestroy");
  api.comm_abort = lib.symbol<int(NcclComm)>("ncclCommAbort");
  api.send = lib.symbol<int(const void*, std::size_t, int, int, NcclComm, void*)>("ncclSend");
  api.recv = lib.symbol<int(void*, std::size_t, int, int, NcclComm, void*)>("ncclRecv");
  api.group_start = lib.symbol<int()>("ncclGroupStart");
  api.group_end = lib.symbol<int()>("ncclGroupEnd");
  api.all_reduce = lib.symbol<int(const void*, void*, std::size_t, int, int, NcclComm, void*)>("ncclAllReduce");
  api.all_gather = lib.symbol<int(const void*, void*, std::size_t, int, NcclComm, void*)>("ncclAllGather");
  api.broadcast = lib.symbol<int(const void*, void*, std::size_t, int, int, NcclComm, void*)>("ncclBroadcast");
  api.reduce_scatter =
      lib.symbol<int(const void*, void*, std::size_t, int, int, NcclComm, void*)>("ncclReduceScatter");
  api.all_to_all = lib.find<int(const void*, void*, std::size_t, int, NcclComm, void*)>("ncclAlltoAll");
  api.comm_init_rank_config =
      lib.find<int(NcclComm*, int, NcclUniqueId, int, NcclConfig*)>("ncclCommInitRankConfig");
  api.mem_alloc = lib.find<int(void**, std::size_t)>("ncclMemAlloc");
  api.mem_free = lib.find<int(void*)>("ncclMemFree");
  api.comm_window_register = lib.find<int(NcclComm, void*, std::size_t, NcclWindow*, int)>("ncclCommWindowRegister");
  api.comm_window_deregister = lib.find<int(NcclComm, NcclWindow)>("ncclCommWindowDeregister");
  api.get_error_string_ = lib.symbol<const char*(int)>("ncclGetErrorString");
  api.get_last_error_ = lib.find<const char*(NcclComm)>("ncclGetLastError");

  int code = 0;
  if (get_version(&code) != 0) throw UnavailableError(cat(lib.path(), ": ncclGetVersion failed"));
  // major*10000 + minor*100 + patch since NCCL 2.9; major*1000 + minor*100 + patch before.
  int major = code >= 10000 ? code / 10000 : code / 1000;
  int minor = code >= 10000 ? (code % 10000) / 100 : (code % 1000) / 100;
  api.version_ = cat(major, ".", minor, ".", code % 100);
  api.version_code_ = code;
  if (major < 2 || (major == 2 && minor < 7)) {
    throw UnavailableError(cat(lib.path(), ": NCCL ", api.version_, " has no ncclSend/ncclRecv (needs 2.7 or newer)"));
  }
  return api;
}

namespace {

/// NCCL_VERSION(2, 27, 0): the first release with CTAPolicy, symmetric windows and ncclMemAlloc together.
constexpr int kZeroCtaVersion = 22700;

}  // namespace

std::string NcclApi::zero_cta_problem() const {
  std::string missing;
  const std::pair<const char*, bool> calls[] = {{"ncclCommInitRankConfig", comm_init_rank_config != nullptr},
                                                {"ncclMemAlloc", mem_alloc != nullptr},
                                                {"ncclMemFree", mem_free != nullptr},
                                                {"ncclCommWindowRegister", comm_window_register != nullptr},
                                                {"ncclCommWindowDeregister", comm_window_deregister != nullptr}};
  for (const auto& [name, found] : calls) {
    if (!found) missing += cat(missing.empty() ? "" : ", ", name);
  }
  if (version_code_ < kZeroCtaVersion || !missing.empty()) {
    return cat("NCCL's zero-SM mode needs NCCL 2.27 or newer (CTAPolicy, ncclMemAlloc, symmetric windows); ",
               library_.path(), " is NCCL ", version_, missing.empty() ? std::string() : cat(", without ", missing));
  }
  return {};
}

NcclConfig NcclApi::default_config() const {
  constexpr int kUndefined = INT_MIN;  // NCCL_CONFIG_UNDEF_INT
  NcclConfig config{};
  config.size = sizeof(NcclConfig);
  config.magic = 0xcafebeef;
  // This layout is 2.28's: a newer library is told 2.28.0 and reads no further; an older one reads its own prefix.
  config.version = static_cast<unsigned int>(std::min(version_code_, 22800));
  for (int* field : {&config.blocking, &config.cgaClusterSize, &config.minCTAs, &config.maxCTAs, &config.splitShare,
                     &config.trafficClass, &config.collnetEnable, &config.CTAPolicy, &config.shrinkShare,
                     &config.nvlsCTAs, &config.nChannelsPerNetPeer, &config.nvlinkCentricSched}) {
    *field = kUndefined;
  }
  config.netName = nullptr;
  config.commName = nullptr;
  return config;
}

void NcclApi::check(int result, const char* call, const std::string& what, NcclComm comm) const {
  if (result == 0) return;
  const char* name = get_error_string_ != nullptr ? get_error_string_(result) : nullptr;
  std::string text = name != nullptr ? name : "unknown";
  std::string last;
  if (get_last_error_ != nullptr) {
    const char* message = get_last_error_(comm);
    if (message != nullptr && *message != '\0') last = message;
  }
  throw Error(ErrorCode::Nccl, cat(what, ": ", call, " returned ", result, " (", text, ")",
                                   last.empty() ? std::string() : cat(": ", last)));
}

}  // namespace pickle::bench
