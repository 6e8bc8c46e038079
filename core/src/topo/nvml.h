// NVLink between this machine's GPUs as the NVIDIA driver reports it (NVML, libnvidia-ml.so.1 opened at run time),
// for machines whose hwloc was built without its NVML backend (Debian's): the topology's NVL paths come from here
// when the hwloc topology carries no NVLinkBandwidth matrix.
#pragma once

#include <string>
#include <vector>

namespace plexus {

// GB/s one way between GPU i and GPU j (row-major, busIds.size()²; 0: no NVLink), for the GPUs with these PCI bus
// ids: direct links counted per pair, and GPUs that reach an NVSwitch connected to each other at the smaller of
// their switch bandwidths. Empty, with *why, where NVML is missing or reports no active link.
std::vector<float> nvmlNvLinkGBs(const std::vector<std::string>& busIds, std::string* why);

// One NVLink's bandwidth (GB/s, one way) by NVLink version (1: P100 .. 5: B200), as NCCL's topology assumes.
float nvlinkGBsPerLink(unsigned version);

}  // namespace plexus
