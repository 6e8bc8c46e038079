// The machine's physical layout (layer 6), from hwloc: packages, NUMA nodes, the cores this process may use, the
// PCI tree with its host bridges and switches, NICs and NVIDIA GPUs, and the path between any two devices as NCCL
// names it. NCCL_TOPO_FILE / PLEXUS_TOPO_FILE loads an hwloc XML file instead of the live machine (tests run this
// machine as an 8-GPU server); NCCL_TOPO_DUMP_FILE writes the one in use. Built without hwloc, the topology is
// "unavailable" and every choice falls back to the order the plugins give.
#pragma once

#include <nccl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace plexus {

// NCCL's path types, nearest first (NCCL_P2P_LEVEL's names): the same device, NVLink, at most one PCIe switch
// between, several switches without the host bridge, through a host bridge (one CPU), across the CPUs' interconnect.
enum class PathType : int { LOC = 0, NVL = 1, PIX = 2, PXB = 3, PHB = 4, SYS = 5 };
const char* pathName(PathType p);

struct HwDevice {
  enum class Kind { Gpu, Nic };
  Kind kind;
  std::string busId;          // PCI "dddd:bb:dd.f", lower case
  std::string name;           // NICs: the verbs device (mlx5_0) else the interface (eth0); GPUs: "GPU" + index
  std::string netdev;         // NICs: the network interface, if any (ib0, eth0)
  std::string cpus;           // CPUs local to the device (its NUMA node), as a list ("0-15,32-47")
  int numa = -1;              // its NUMA node's OS index (-1: unknown)
  float linkGBs = 0;          // its PCIe link (GB/s), 0 when the topology does not say
  const void* obj = nullptr;  // hwloc's object
};

class HwTopology {
 public:
  ~HwTopology();
  HwTopology(const HwTopology&) = delete;
  HwTopology& operator=(const HwTopology&) = delete;

  // From `file` (hwloc XML) when not empty, else the live machine. nullptr and *error when it cannot be loaded.
  static std::unique_ptr<HwTopology> load(const std::string& file, std::string* error);
  // The process's: NCCL_TOPO_FILE or PLEXUS_TOPO_FILE when set, else the live machine; loaded once (written to
  // NCCL_TOPO_DUMP_FILE then). nullptr where hwloc is missing or the file is bad (*why says which; logged once).
  static const HwTopology* process(std::string* why = nullptr);

  const std::string& source() const { return source_; }  // "live" or the file
  int packages() const { return packages_; }
  int numaNodes() const { return numaNodes_; }
  int cores() const { return cores_; }  // cores of the machine
  // CPUs this process may run on: the allowed set (cgroups) and, on the live machine, its binding (affinity).
  int usableCpus() const { return usableCpus_; }
  const std::string& usableCpuList() const { return usableCpuList_; }
  const std::vector<HwDevice>& gpus() const { return gpus_; }  // in PCI bus order (CUDA_DEVICE_ORDER=PCI_BUS_ID)
  const std::vector<HwDevice>& nics() const { return nics_; }

  const HwDevice* gpuByBusId(const std::string& busId) const;
  const HwDevice* nicByBusId(const std::string& busId) const;
  PathType path(const HwDevice& a, const HwDevice& b) const;
  // From CPUs rather than a device (host backend): PHB when the device's NUMA node holds one of the CPUs, else SYS.
  PathType pathFromCpus(const HwDevice& d, const std::string& cpuList) const;
  // Where a rank sits in the machine, as one number whose 16-bit fields, from the highest, are its package, NUMA
  // node, host bridge and top-level PCIe switch (each an index + 1; 0 where it has none or it is unknown): a node's
  // ranks sorted by it sit next to those they share a switch, then a host bridge, a NUMA node, a package with. From
  // the rank's GPU, or (host backend) from its CPUs: the package and NUMA node of the first.
  uint64_t place(const HwDevice& gpu) const;
  uint64_t placeOfCpus(const std::string& cpuList) const;
  // What the cost models assume of a path between two PCI devices (GB/s): NVLink's where two GPUs have it, else the
  // slower PCIe link, fewer across CPUs.
  float pathGBs(const HwDevice& a, const HwDevice& b) const;
  // NVLink between two GPUs, GB/s one way (0: none): from the topology's NVLinkBandwidth matrix (hwloc's NVML
  // backend, or a topology file that has one), else on the live machine from NVML. NVLink makes their path NVL.
  float nvlinkGBs(const HwDevice& a, const HwDevice& b) const;
  const std::string& nvlinkSource() const { return nvlinkSource_; }  // "" (none), "hwloc NVLinkBandwidth", "NVML"
  bool writeXml(const std::string& file, std::string* error) const;
  // The tree as plexus-info --topology prints it: packages and NUMA nodes with their CPUs, host bridges, switches,
  // GPUs and NICs.
  std::string tree() const;

 private:
  HwTopology() = default;
  void build();
  void readNvLinks();
  struct Impl;
  Impl* impl_ = nullptr;
  std::string source_;
  int packages_ = 0, numaNodes_ = 0, cores_ = 0, usableCpus_ = 0;
  std::string usableCpuList_;
  std::vector<HwDevice> gpus_, nics_;
  std::vector<float> nvlink_;  // gpus_.size()², GB/s; empty without NVLink
  std::string nvlinkSource_;
};

// CPU lists ("0-3,8,10-11") as sets: parse (nullopt-like empty on a malformed list) and print, and their
// intersection. Linux's and hwloc's list syntax.
std::vector<bool> parseCpuList(const std::string& list, bool* ok = nullptr);
std::string cpuListText(const std::vector<bool>& set);
std::string intersectCpuLists(const std::string& a, const std::string& b);

// The CPUs a communicator's threads (its proxy) should run on: the CPUs local to its GPU, within the job's
// (jobCpus, the process's affinity) unless ignoreJobAffinity (NCCL_IGNORE_CPU_AFFINITY=1); the job's when the two
// share none, or when the GPU's are unknown. NCCL's choice.
std::string bindingCpus(const HwDevice* gpu, const std::string& jobCpus, bool ignoreJobAffinity);

// The PCI bus id of CUDA device `ordinal` from the driver ("" without one).
std::string cudaBusId(int ordinal);

// A bus id as the topology spells it ("0000:17:00.0", lower case) from any of: that form, upper case, without the
// domain ("17:00.0"), or a sysfs path ending in one (a net plugin's pciPath). Empty when none is found.
std::string normalizeBusId(const std::string& s);

// The order in which a rank uses net devices: devs[i] is usable (getProperties worked) and has the PCI bus id
// busIds[i] (empty: unknown). Nearest first from the rank's GPU (gpuBusId) or, without one, from its CPUs;
// devices the topology does not place come after those it does, and unusable ones never. *nearest: how many lead
// the order equally near (same path type and bandwidth), the ones a rank spreads its channels over. `why` gets one
// line per device for the log. Without a topology: the usable devices in plugin order, all equally near.
std::vector<int> netDeviceOrder(const HwTopology* topo, const std::vector<std::string>& busIds,
                                const std::vector<bool>& usable, const std::string& gpuBusId,
                                const std::string& cpuList, int* nearest, std::string* why);

}  // namespace plexus
