#include "topology/nvlink.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace pickle::topology {
namespace {

bool parse_hex(std::string_view text, std::size_t max_digits, std::uint32_t& value) {
  if (text.empty() || text.size() > max_digits) return false;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
  return error == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::optional<PciAddress> parse_pci_address(std::string_view text) {
  PciAddress address;
  std::size_t dot = text.rfind('.');
  if (dot == std::string_view::npos) return std::nullopt;
  if (!parse_hex(text.substr(dot + 1), 1, address.function) || address.function > 7) return std::nullopt;
  std::string_view head = text.substr(0, dot);
  std::size_t last_colon = head.rfind(':');
  if (last_colon == std::string_view::npos) return std::nullopt;
  if (!parse_hex(head.substr(last_colon + 1), 2, address.device) || address.device > 31) return std::nullopt;
  head = head.substr(0, last_colon);
  std::size_t first_colon = head.rfind(':');
  if (first_colon == std::string_view::npos) {
    if (!parse_hex(head, 2, address.bus)) return std::nullopt;
    return address;
  }
  if (!parse_hex(head.substr(first_colon + 1), 2, address.bus)) return std::nullopt;
  if (!parse_hex(head.substr(0, first_colon), 8, address.domain)) return std::nullopt;
  return address;
}

std::string to_string(const PciAddress& address) {
  char text[32];
  std::snprintf(text, sizeof text, "%04x:%02x:%02x.%x", address.domain, address.bus, address.device,
                address.function);
  return text;
}

std::vector<std::vector<Link>> count_nvlinks(const std::vector<PciAddress>& gpus,
                                             const std::vector<ActiveLink>& links) {
  const std::size_t n = gpus.size();
  std::vector<std::vector<int>> direct(n, std::vector<int>(n, 0));
  std::vector<int> to_switch(n, 0);

  for (const auto& link : links) {
    if (link.gpu < 0 || static_cast<std::size_t>(link.gpu) >= n) continue;
    const auto from = static_cast<std::size_t>(link.gpu);
    if (link.remote_kind == RemoteKind::Switch) {
      ++to_switch[from];
      continue;
    }
    std::optional<std::size_t> peer;
    if (link.remote) {
      for (std::size_t j = 0; j < n; ++j) {
        if (gpus[j].same_device(*link.remote)) peer = j;
      }
    }
    if (peer) {
      if (*peer != from) ++direct[from][*peer];
      continue;
    }
    // A GPU we were not given (hidden by CUDA_VISIBLE_DEVICES) or a CPU (POWER's NPU): no path between our GPUs.
    if (link.remote_kind == RemoteKind::Gpu || link.remote_kind == RemoteKind::Cpu) continue;
    // Far end unknown and not one of our GPUs: NVSwitch. Without even an address there is nothing to go on.
    if (link.remote) ++to_switch[from];
  }

  std::vector<std::vector<Link>> result(n, std::vector<Link>(n));
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      Link& out = result[i][j];
      if (i == j) {
        out.type = LinkType::Self;
      } else if (direct[i][j] > 0) {
        out.type = LinkType::NvLink;
        out.nvlinks = direct[i][j];
      } else if (to_switch[i] > 0 && to_switch[j] > 0) {
        out.type = LinkType::NvSwitch;
        out.nvlinks = std::min(to_switch[i], to_switch[j]);
      } else {
        out.type = LinkType::None;
      }
    }
  }
  return result;
}

}  // namespace pickle::topology
