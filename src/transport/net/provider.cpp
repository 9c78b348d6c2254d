#include "transport/net/provider.hpp"

#include <rdma/fi_errno.h>

#include <cstring>
#include <map>
#include <set>

#include <pickle/error.hpp>

#include "core/env.hpp"
#include "core/format.hpp"
#include "transport/net/fabric_error.hpp"
#include "transport/net/net_transport.hpp"

namespace pickle::transport::net {
namespace {

// What the transport needs of an endpoint, and which of libfabric's "the application does it" modes it can honour.
InfoPtr make_hints(const std::string& provider) {
  InfoPtr hints(fi_allocinfo());
  if (!hints) throw SystemError("fi_allocinfo failed", ENOMEM);
  hints->ep_attr->type = FI_EP_RDM;
  // FI_MSG|FI_RECV only to post the receive buffers that FI_RX_CQ_DATA providers consume per remote CQ data.
  hints->caps = FI_RMA | FI_WRITE | FI_REMOTE_WRITE | FI_MSG | FI_RECV;
  hints->mode = FI_CONTEXT | FI_CONTEXT2 | FI_RX_CQ_DATA;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  // Only the progress thread touches endpoints and queues; registration takes the same lock (net_impl.hpp).
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  if (!provider.empty()) {
    hints->fabric_attr->prov_name = strdup(provider.c_str());  // freed by fi_freeinfo
    if (hints->fabric_attr->prov_name == nullptr) throw SystemError("strdup failed", ENOMEM);
  }
  return hints;
}

InfoPtr get_info(const std::string& provider, int* rc) {
  InfoPtr hints = make_hints(provider);
  fi_info* list = nullptr;
  *rc = fi_getinfo(kFabricApiVersion, nullptr, nullptr, 0, hints.get(), &list);
  return InfoPtr(*rc == 0 ? list : nullptr);
}

// efa names its RDM domains "<device>-rdm", so "rdmap0s31" selects "rdmap0s31-rdm" too.
bool domain_matches(const char* domain, const std::string& iface) {
  if (iface.empty()) return true;
  if (domain == nullptr) return false;
  std::string name(domain);
  return name == iface || (name.size() > iface.size() && name.compare(0, iface.size(), iface) == 0 &&
                           name[iface.size()] == '-');
}

}  // namespace

std::string describe_provider(const fi_info& info) {
  return cat(info.fabric_attr->prov_name ? info.fabric_attr->prov_name : "?", " on ",
             info.domain_attr->name ? info.domain_attr->name : "?", " (fabric ",
             info.fabric_attr->name ? info.fabric_attr->name : "?", ")");
}

std::string offered_providers() {
  int rc = 0;
  InfoPtr list = get_info("", &rc);
  std::map<std::string, std::set<std::string>> offered;
  for (const fi_info* info = list.get(); info != nullptr; info = info->next) {
    offered[info->fabric_attr->prov_name ? info->fabric_attr->prov_name : "?"].insert(
        info->domain_attr->name ? info->domain_attr->name : "?");
  }
  if (offered.empty()) return "none";
  std::string text;
  for (const auto& [provider, domains] : offered) {
    if (!text.empty()) text += ", ";
    text += provider + " (";
    bool first = true;
    for (const auto& domain : domains) {
      text += (first ? "" : ", ") + domain;
      first = false;
    }
    text += ")";
  }
  return text;
}

InfoPtr select_provider(const NetOptions& options, int rank) {
  int rc = 0;
  InfoPtr list = get_info(options.provider, &rc);
  if (rc != 0 && rc != -FI_ENODATA) {
    throw_fabric_error(OpContext{rank, -1, "fi_getinfo for the net transport"}, "fi_getinfo", rc);
  }
  const fi_info* chosen = nullptr;
  for (const fi_info* info = list.get(); info != nullptr; info = info->next) {
    if (!domain_matches(info->domain_attr->name, options.iface)) continue;
    if (info->domain_attr->cq_data_size < sizeof(std::uint32_t)) continue;  // the message id rides in CQ data
    if (chosen == nullptr) chosen = info;
    if (info->addr_format == FI_SOCKADDR_IN) {
      chosen = info;
      break;
    }
  }
  if (chosen == nullptr) {
    std::string asked = cat("provider '", options.provider, "'");
    if (!options.iface.empty()) asked += cat(" on interface '", options.iface, "'");
    std::string filter;
    if (auto restricted = env::foreign("FI_PROVIDER")) filter = cat(" (FI_PROVIDER=", *restricted, " limits the list)");
    throw UnavailableError(cat("rank ", rank, ": net transport: libfabric offers no ", asked,
                               " with reliable-datagram endpoints, RMA writes and remote CQ data (PICKLE_NET_PROVIDER=",
                               options.provider, ", PICKLE_NET_IFACE=", options.iface.empty() ? "(unset)" : options.iface,
                               "); fi_getinfo offers: ", offered_providers(), filter));
  }
  return duplicate_info(*chosen);
}

}  // namespace pickle::transport::net
