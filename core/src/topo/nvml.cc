#include "topo/nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>

#include "topo/hw_topo.h"

namespace plexus {

namespace {

// NVML's ABI, the few pieces used (nvml.h is not part of the CUDA toolkit images this builds on).
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t as NVML lays it out");
constexpr unsigned kMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS

struct Nvml {
  nvmlReturn_t (*init)();
  nvmlReturn_t (*handleByBusId)(const char*, nvmlDevice_t*);
  nvmlReturn_t (*linkState)(nvmlDevice_t, unsigned, int*);
  nvmlReturn_t (*linkVersion)(nvmlDevice_t, unsigned, unsigned*);
  nvmlReturn_t (*remotePci)(nvmlDevice_t, unsigned, nvmlPciInfo_t*);
};

const Nvml* nvml(std::string* why) {
  static Nvml api;
  static const Nvml* loaded = []() -> const Nvml* {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return nullptr;
    api.init = (decltype(api.init))dlsym(lib, "nvmlInit_v2");
    api.handleByBusId = (decltype(api.handleByBusId))dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    api.linkState = (decltype(api.linkState))dlsym(lib, "nvmlDeviceGetNvLinkState");
    api.linkVersion = (decltype(api.linkVersion))dlsym(lib, "nvmlDeviceGetNvLinkVersion");
    api.remotePci = (decltype(api.remotePci))dlsym(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    if (!api.init || !api.handleByBusId || !api.linkState || !api.linkVersion || !api.remotePci || api.init() != 0)
      return nullptr;
    return &api;
  }();
  if (!loaded) *why = "NVML (libnvidia-ml.so.1) is not there or does not start";
  return loaded;
}

}  // namespace

float nvlinkGBsPerLink(unsigned version) {
  switch (version) {
    case 1:
      return 18.0f;
    case 2:
    case 3:
    case 4:
      return 20.0f;
    default:
      return version >= 5 ? 40.0f : 20.0f;
  }
}

std::vector<float> nvmlNvLinkGBs(const std::vector<std::string>& busIds, std::string* why) {
  const Nvml* api = nvml(why);
  const size_t n = busIds.size();
  if (!api || n < 2) return {};
  std::vector<float> direct(n * n, 0), toSwitch(n, 0);
  bool any = false;
  for (size_t i = 0; i < n; i++) {
    nvmlDevice_t dev;
    if (api->handleByBusId(busIds[i].c_str(), &dev) != 0) continue;
    for (unsigned l = 0; l < kMaxLinks; l++) {
      int active = 0;
      nvmlPciInfo_t remote;
      unsigned version = 0;
      if (api->linkState(dev, l, &active) != 0 || !active || api->remotePci(dev, l, &remote) != 0) continue;
      api->linkVersion(dev, l, &version);
      const float gbs = nvlinkGBsPerLink(version);
      const std::string peer = normalizeBusId(remote.busId);
      size_t j = 0;
      while (j < n && busIds[j] != peer) j++;
      if (j < n)
        direct[i * n + j] += gbs;
      else
        toSwitch[i] += gbs;  // an NVSwitch (or another device): every GPU on a switch reaches every other
      any = true;
    }
  }
  if (!any) {
    *why = "NVML reports no active NVLink";
    return {};
  }
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < n; j++)
      if (i != j && toSwitch[i] > 0 && toSwitch[j] > 0)
        direct[i * n + j] = std::max(direct[i * n + j], std::min(toSwitch[i], toSwitch[j]));
  return direct;
}

}  // namespace plexus
