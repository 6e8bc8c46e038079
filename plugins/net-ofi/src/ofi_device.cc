// net-ofi: device discovery. One device per domain of one provider: FI_PROVIDER when set (libfabric
// filters on it), else the first provider libfabric ranks for RDM tagged messaging, shm excepted
// (it cannot leave the host). Loopback domains are used only when the provider offers nothing else.
#include "ofi_device.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <rdma/fi_errno.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace plexus::ofi {

namespace {

// 1.10 has everything used here (fi_context2, nic attributes); newer libraries accept it.
constexpr uint32_t kApiVersion = FI_VERSION(1, 10);

using InfoPtr = std::unique_ptr<fi_info, decltype(&fi_freeinfo)>;

std::mutex gDiscoverMutex;
bool gDiscovered = false;
ncclResult_t gDiscoverResult = ncclSuccess;
// Lives as long as the process: pointers into it (names, infos) are handed to the runtime.
std::vector<Device>* gDevices = new std::vector<Device>();

InfoPtr makeHints() {
  InfoPtr h(fi_allocinfo(), fi_freeinfo);
  if (!h) return h;
  h->caps = FI_TAGGED | FI_SEND | FI_RECV;
  h->mode = FI_CONTEXT | FI_CONTEXT2;  // every operation carries an fi_context2 the provider may use
  h->ep_attr->type = FI_EP_RDM;
  // Registration modes this plugin honours; a provider wanting more (FI_MR_HMEM...) is not offered.
  h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ENDPOINT | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  h->domain_attr->threading = FI_THREAD_DOMAIN;  // Domain::mutex serialises every call
  return h;
}

bool isLoopback(const fi_info* info) {
  if (info->domain_attr->name && strcmp(info->domain_attr->name, "lo") == 0) return true;
  if (!info->src_addr) return false;
  if (info->addr_format == FI_SOCKADDR_IN && info->src_addrlen >= sizeof(sockaddr_in)) {
    auto* a = static_cast<const sockaddr_in*>(info->src_addr);
    return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
  }
  if (info->addr_format == FI_SOCKADDR_IN6 && info->src_addrlen >= sizeof(sockaddr_in6)) {
    auto* a = static_cast<const sockaddr_in6*>(info->src_addr);
    return IN6_IS_ADDR_LOOPBACK(&a->sin6_addr);
  }
  return false;
}

int tagBits(const fi_info* info) {
  uint64_t format = info->ep_attr->mem_tag_format;
  return format ? 64 - __builtin_clzll(format) : 64;
}

std::string realPath(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) ? std::string(buf) : std::string();
}

// An interface name safe to put in a /sys path.
bool plainName(const std::string& s) { return !s.empty() && s.find('/') == std::string::npos && s[0] != '.'; }

// A PCI function's directory name: domain:bus:device.function, as 0000:3b:00.0.
bool isPciName(const std::string& s) {
  unsigned d, b, dev, f;
  int n = 0;
  return sscanf(s.c_str(), "%x:%x:%x.%x%n", &d, &b, &dev, &f, &n) == 4 && n == static_cast<int>(s.size());
}

// The PCI device a sysfs path belongs to: the path itself or its nearest PCI ancestor (a virtio NIC's
// device is virtioN under its PCI function). Empty when there is none.
std::string pciAncestor(std::string path) {
  while (path.size() > 1) {
    size_t slash = path.rfind('/');
    if (slash == std::string::npos) break;
    if (isPciName(path.substr(slash + 1))) return path;
    path.resize(slash);
  }
  return {};
}

// The NIC's PCI directory (what NCCL's topology reads): from the NIC's bus attributes, else from the
// kernel interface of the domain's name; empty for virtual devices (lo, veth, shm).
std::string pciPathOf(const fi_info* info, const std::string& name) {
  if (info->nic && info->nic->bus_attr && info->nic->bus_attr->bus_type == FI_BUS_PCI) {
    const fi_pci_attr& p = info->nic->bus_attr->attr.pci;
    char path[96];
    snprintf(path, sizeof path, "/sys/bus/pci/devices/%04x:%02x:%02x.%x", p.domain_id, p.bus_id, p.device_id,
             p.function_id);
    std::string real = realPath(path);
    if (!real.empty()) return real;
  }
  if (!plainName(name)) return {};
  return pciAncestor(realPath("/sys/class/net/" + name + "/device"));
}

// Link speed in Mbps: the NIC's link attributes (bits per second), else the kernel interface's.
bool speedOf(const fi_info* info, const std::string& name, int* mbps) {
  if (info->nic && info->nic->link_attr && info->nic->link_attr->speed > 0) {
    *mbps = static_cast<int>(info->nic->link_attr->speed / 1000000);
    if (*mbps > 0) return true;
  }
  if (!plainName(name)) return false;
  std::ifstream f("/sys/class/net/" + name + "/speed");
  long v = 0;
  if (f >> v && v > 0 && v < INT_MAX) {
    *mbps = static_cast<int>(v);
    return true;
  }
  return false;
}

Device describe(const fi_info* info, int index) {
  Device d;
  d.index = index;
  d.info = fi_dupinfo(info);
  d.name = info->domain_attr->name ? info->domain_attr->name : "ofi";
  d.provider = info->fabric_attr->prov_name ? info->fabric_attr->prov_name : "?";
  d.fabric = info->fabric_attr->name ? info->fabric_attr->name : "?";
  d.pciPath = pciPathOf(info, d.name);
  d.speedKnown = speedOf(info, d.name, &d.speedMbps);
  if (!d.speedKnown) d.speedMbps = 10000;  // as NCCL's socket net for an interface that does not say
  std::string id = d.provider + "/" + d.fabric + "/" + d.name;
  d.guid = fnv1a(id.data(), id.size());
  d.tagBits = tagBits(info);
  d.mrLocal = info->domain_attr->mr_mode & FI_MR_LOCAL;
  static const bool always = envInt("OFI_MR_REGISTER", 0) != 0;
  d.registerAll = d.mrLocal || always;
  d.mrEndpoint = info->domain_attr->mr_mode & FI_MR_ENDPOINT;
  d.mrProvKey = info->domain_attr->mr_mode & FI_MR_PROV_KEY;
  d.maxMsgSize = info->ep_attr->max_msg_size;
  d.wireId = fnv1a(d.provider.data(), d.provider.size(), info->addr_format);
  return d;
}

ncclResult_t discover() {
  InfoPtr hints = makeHints();
  if (!hints) {
    OFI_WARN("fi_allocinfo failed: out of memory");
    return ncclSystemError;
  }
  const char* wanted = getenv("FI_PROVIDER");
  fi_info* raw = nullptr;
  int rc = fi_getinfo(kApiVersion, nullptr, nullptr, 0, hints.get(), &raw);
  InfoPtr list(raw, fi_freeinfo);
  if (rc || !list) {
    if (wanted)
      OFI_WARN(
          "libfabric offers no RDM endpoint with tagged messages for FI_PROVIDER=%s (%s); check `fi_info -p %s "
          "-t FI_EP_RDM -c FI_TAGGED` and the provider's interface knobs (FI_TCP_IFACE...)",
          wanted, fiError(rc).c_str(), wanted);
    else
      OFI_INFO("libfabric offers no RDM endpoint with tagged messages (%s); the plugin is not used",
               fiError(rc).c_str());
    return ncclSystemError;
  }

  // The provider: FI_PROVIDER's (libfabric listed only it), else libfabric's first choice but shm.
  const char* provider = nullptr;
  for (fi_info* i = list.get(); i && !provider; i = i->next) {
    if (!wanted && strcmp(i->fabric_attr->prov_name, "shm") == 0) continue;
    provider = i->fabric_attr->prov_name;
  }
  if (!provider) {
    OFI_INFO("libfabric offers only shm, which cannot leave this host; set FI_PROVIDER=shm to use it anyway");
    return ncclSystemError;
  }

  std::vector<const fi_info*> chosen, loopback;
  for (fi_info* i = list.get(); i; i = i->next) {
    if (strcmp(i->fabric_attr->prov_name, provider) != 0) continue;
    const char* dom = i->domain_attr->name ? i->domain_attr->name : "";
    if (tagBits(i) < kMinTagBits) {
      OFI_INFO("provider %s domain %s matches %d tag bits, fewer than the %d this plugin needs; skipped", provider, dom,
               tagBits(i), kMinTagBits);
      continue;
    }
    bool seen = false;  // the first fi_info of each domain wins: libfabric lists its preferred one first
    for (const fi_info* c : chosen) seen |= strcmp(c->domain_attr->name, dom) == 0;
    for (const fi_info* c : loopback) seen |= strcmp(c->domain_attr->name, dom) == 0;
    if (seen) continue;
    (isLoopback(i) ? loopback : chosen).push_back(i);
  }
  if (chosen.empty()) chosen = loopback;  // a host with no other interface, or FI_*_IFACE=lo
  if (chosen.empty()) {
    OFI_WARN("provider %s offers no usable domain; check `fi_info -p '%s' -v`", provider, provider);
    return ncclSystemError;
  }
  for (const fi_info* i : chosen) gDevices->push_back(describe(i, static_cast<int>(gDevices->size())));
  for (const Device& d : *gDevices) {
    OFI_INFO("device %d: %s, provider %s, fabric %s, %d Mbps%s, pci %s, %d tag bits, MR %s%s, progress %s", d.index,
             d.name.c_str(), d.provider.c_str(), d.fabric.c_str(), d.speedMbps, d.speedKnown ? "" : " (assumed)",
             d.pciPath.empty() ? "none (virtual)" : d.pciPath.c_str(), d.tagBits,
             d.mrLocal       ? "registered (FI_MR_LOCAL)"
             : d.registerAll ? "registered (PLEXUS_OFI_MR_REGISTER)"
                             : "not needed",
             d.mrEndpoint ? " per endpoint" : "",
             d.info->domain_attr->data_progress == FI_PROGRESS_AUTO ? "auto" : "manual");
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t discoverDevices() {
  std::lock_guard<std::mutex> lock(gDiscoverMutex);
  if (!gDiscovered) {
    gDiscoverResult = discover();
    gDiscovered = true;
  }
  return gDiscoverResult;
}

const std::vector<Device>& devices() { return *gDevices; }

ncclResult_t checkDevice(int dev, const char* caller) {
  if (dev >= 0 && dev < static_cast<int>(gDevices->size())) return ncclSuccess;
  OFI_WARN("%s: device %d does not exist (this plugin has %zu); pass an index below devices()", caller, dev,
           gDevices->size());
  return ncclInvalidArgument;
}

Domain::~Domain() = default;

ncclResult_t Domain::get(int dev, std::shared_ptr<Domain>* out) {
  static std::mutex mutex;
  static auto* cache = new std::vector<std::weak_ptr<Domain>>();
  std::lock_guard<std::mutex> lock(mutex);
  if (cache->size() < gDevices->size()) cache->resize(gDevices->size());
  if ((*out = (*cache)[dev].lock())) return ncclSuccess;

  const Device& d = (*gDevices)[dev];
  std::shared_ptr<Domain> domain(new Domain(d));
  fid_fabric* fabric = nullptr;
  int rc = fi_fabric(d.info->fabric_attr, &fabric, nullptr);
  if (rc) {
    OFI_WARN("cannot open fabric %s of provider %s: %s", d.fabric.c_str(), d.provider.c_str(), fiError(rc).c_str());
    return ncclSystemError;
  }
  domain->fabric_.reset(fabric);
  fid_domain* dom = nullptr;
  rc = fi_domain(fabric, d.info, &dom, nullptr);
  if (rc) {
    OFI_WARN("cannot open domain %s of provider %s: %s", d.name.c_str(), d.provider.c_str(), fiError(rc).c_str());
    return ncclSystemError;
  }
  domain->domain_.reset(dom);
  (*cache)[dev] = domain;
  *out = std::move(domain);
  return ncclSuccess;
}

}  // namespace plexus::ofi
