// NVLink accounting against made-up NVML tables: the shapes of real machines, without the machines.
#include <gtest/gtest.h>

#include <vector>

#include "topology/nvlink.hpp"

namespace pickle::topology {
namespace {

PciAddress pci(std::uint32_t bus, std::uint32_t domain = 0) { return PciAddress{domain, bus, 0, 0}; }

/// `count` active links of `gpu`, numbered from `first_link`, all ending at `remote`.
void add_links(std::vector<ActiveLink>& links, int gpu, int count, std::optional<PciAddress> remote,
               RemoteKind kind = RemoteKind::Unknown, unsigned first_link = 0) {
  for (int k = 0; k < count; ++k) {
    links.push_back(ActiveLink{gpu, first_link + static_cast<unsigned>(k), kind, remote});
  }
}

TEST(PciAddress, ParsesCudaAndNvmlSpellings) {
  auto cuda = parse_pci_address("0000:1B:00.0");
  auto nvml = parse_pci_address("00000000:1b:00.0");
  ASSERT_TRUE(cuda && nvml);
  EXPECT_EQ(*cuda, *nvml);
  EXPECT_EQ(cuda->bus, 0x1bu);
  auto short_form = parse_pci_address("c1:1f.7");
  ASSERT_TRUE(short_form);
  EXPECT_EQ(*short_form, (PciAddress{0, 0xc1, 0x1f, 7}));
  auto wide_domain = parse_pci_address("0001abcd:02:03.1");
  ASSERT_TRUE(wide_domain);
  EXPECT_EQ(wide_domain->domain, 0x0001abcdu);
  EXPECT_EQ(to_string(*cuda), "0000:1b:00.0");
  EXPECT_EQ(to_string(*wide_domain), "1abcd:02:03.1");
}

TEST(PciAddress, RejectsMalformedText) {
  for (const char* text : {"", "0000:18:00", "0000:18.00.0", "zz:00.0", "0000:18:32.0", "0000:18:00.8",
                           "000000000:18:00.0", "0000:180:00.0", "0000:18:00.", ":18:00.0", "0000:-1:00.0",
                           "0000:18:00.0 "}) {
    EXPECT_FALSE(parse_pci_address(text)) << text;
  }
}

TEST(CountNvLinks, DirectLinksBetweenTwoGpus) {
  std::vector<PciAddress> gpus = {pci(0x18), pci(0x2a)};
  std::vector<ActiveLink> links;
  add_links(links, 0, 4, gpus[1], RemoteKind::Gpu);
  add_links(links, 1, 4, gpus[0], RemoteKind::Gpu);
  auto result = count_nvlinks(gpus, links);
  ASSERT_EQ(result.size(), 2u);
  EXPECT_EQ(result[0][0].type, LinkType::Self);
  EXPECT_EQ(result[0][1].type, LinkType::NvLink);
  EXPECT_EQ(result[0][1].nvlinks, 4);
  EXPECT_EQ(result[1][0].nvlinks, 4);
  EXPECT_EQ(result[0][1].label(), "NV4");
  EXPECT_EQ(result[0][0].label(), "X");
}

TEST(CountNvLinks, HgxSwitchWithInvisibleSwitchAddresses) {
  // H100/H200 HGX: 18 links per GPU, all into NVSwitches whose addresses are no GPU's; older drivers give no kind.
  std::vector<PciAddress> gpus = {pci(0x18), pci(0x2a)};
  std::vector<ActiveLink> links;
  for (int gpu = 0; gpu < 2; ++gpu) {
    for (unsigned link = 0; link < 18; ++link) {
      links.push_back(ActiveLink{gpu, link, RemoteKind::Unknown, pci(0xff, 0xffffffff)});
    }
  }
  auto result = count_nvlinks(gpus, links);
  EXPECT_EQ(result[0][1].type, LinkType::NvSwitch);
  EXPECT_EQ(result[0][1].nvlinks, 18);
  EXPECT_EQ(result[1][0].nvlinks, 18);
  EXPECT_EQ(result[0][1].label(), "NV18");
}

TEST(CountNvLinks, SwitchKindWithoutAddress) {
  // Newer drivers name the far end a switch and may give no PCI info for it at all.
  std::vector<PciAddress> gpus = {pci(0x18), pci(0x2a), pci(0x3a)};
  std::vector<ActiveLink> links;
  add_links(links, 0, 18, std::nullopt, RemoteKind::Switch);
  add_links(links, 1, 12, std::nullopt, RemoteKind::Switch);  // a GPU with degraded links
  auto result = count_nvlinks(gpus, links);
  EXPECT_EQ(result[0][1].type, LinkType::NvSwitch);
  EXPECT_EQ(result[0][1].nvlinks, 12);  // the pair is as wide as its narrower side
  EXPECT_EQ(result[1][0].nvlinks, 12);
  EXPECT_EQ(result[0][2].type, LinkType::None);  // GPU 2 has no links at all
  EXPECT_EQ(result[2][1].type, LinkType::None);
}

TEST(CountNvLinks, HybridCubeMeshCountsEachPairSeparately) {
  // DGX-1 style: GPU0-GPU1 two links, GPU0-GPU2 one link, GPU1-GPU2 none; addresses differ in domain and function.
  std::vector<PciAddress> gpus = {pci(0x06, 1), pci(0x07, 1), pci(0x0a, 2)};
  PciAddress gpu1_function1 = gpus[1];
  gpu1_function1.function = 1;  // NVML has no function number; matching must ignore it
  std::vector<ActiveLink> links;
  add_links(links, 0, 2, gpu1_function1);
  add_links(links, 0, 1, gpus[2], RemoteKind::Unknown, 2);
  add_links(links, 1, 2, gpus[0]);
  add_links(links, 2, 1, gpus[0]);
  auto result = count_nvlinks(gpus, links);
  EXPECT_EQ(result[0][1].type, LinkType::NvLink);
  EXPECT_EQ(result[0][1].nvlinks, 2);
  EXPECT_EQ(result[0][2].nvlinks, 1);
  EXPECT_EQ(result[2][0].nvlinks, 1);
  EXPECT_EQ(result[1][2].type, LinkType::None);
  EXPECT_EQ(result[1][2].nvlinks, 0);
}

TEST(CountNvLinks, IgnoresHiddenGpusCpusAndNonsense) {
  std::vector<PciAddress> gpus = {pci(0x18), pci(0x2a)};
  std::vector<ActiveLink> links;
  add_links(links, 0, 6, pci(0x99), RemoteKind::Gpu);  // a GPU that CUDA_VISIBLE_DEVICES hides
  add_links(links, 1, 6, pci(0x99), RemoteKind::Gpu);
  add_links(links, 0, 2, pci(0x01), RemoteKind::Cpu);  // POWER9 NVLink to the CPU
  add_links(links, 1, 2, pci(0x01), RemoteKind::Cpu);
  add_links(links, 0, 3, std::nullopt);                // no kind and no address: nothing to go on
  add_links(links, 1, 3, std::nullopt);
  add_links(links, 0, 1, gpus[0]);                     // a link to itself
  add_links(links, 5, 4, gpus[0]);                     // a GPU index that does not exist
  add_links(links, -1, 4, gpus[1]);
  auto result = count_nvlinks(gpus, links);
  EXPECT_EQ(result[0][1].type, LinkType::None);
  EXPECT_EQ(result[1][0].type, LinkType::None);
  EXPECT_EQ(result[0][0].type, LinkType::Self);
}

TEST(CountNvLinks, NoGpus) {
  EXPECT_TRUE(count_nvlinks({}, {}).empty());
}

TEST(Link, Labels) {
  EXPECT_EQ((Link{LinkType::Pcie, 0, true}).label(), "PCIe");
  EXPECT_EQ((Link{LinkType::None, 0, false}).label(), "none");
  EXPECT_EQ((Link{LinkType::Unknown, 0, true}).label(), "?");
  EXPECT_EQ((Link{LinkType::NvSwitch, 18, true}).label(), "NV18");
  EXPECT_STREQ(link_type_name(LinkType::NvSwitch), "nvswitch");
  EXPECT_STREQ(link_type_name(LinkType::Pcie), "pcie");
}

}  // namespace
}  // namespace pickle::topology
