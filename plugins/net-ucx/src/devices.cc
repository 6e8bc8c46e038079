#include "devices.h"

#include <dirent.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <ucs/async/async_fwd.h>
#include <uct/api/uct.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>

#include "log.h"

namespace plexus::net_ucx {
namespace {

// NCCL's socket transport assumes this when sysfs reports no speed (loopback, most virtual NICs).
constexpr int kFallbackSpeedMbps = 10000;

std::string firstLine(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

std::string realPath(const std::string& path) {
  char* p = realpath(path.c_str(), nullptr);
  std::string s = p ? p : "";
  free(p);
  return s;
}

std::vector<std::string> split(const char* list) {
  std::vector<std::string> out;
  std::string s = list ? list : "";
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = std::min(s.find(',', pos), s.size());
    if (comma > pos) out.push_back(s.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return out;
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// "0c:42:a1:..:.." (MAC) or "0c42:a103:00ab:cdef" (IB GUID): the hex digits as one number.
uint64_t hexDigits(const std::string& s) {
  uint64_t v = 0;
  for (char c : s) {
    if (c >= '0' && c <= '9') v = (v << 4) | static_cast<uint64_t>(c - '0');
    if (c >= 'a' && c <= 'f') v = (v << 4) | static_cast<uint64_t>(c - 'a' + 10);
    if (c >= 'A' && c <= 'F') v = (v << 4) | static_cast<uint64_t>(c - 'A' + 10);
  }
  return v;
}

// UCT's latency model for one transport on one device; 0 when the interface cannot be opened.
float transportLatencyUs(uct_md_h md, uct_worker_h worker, const uct_tl_resource_desc_t& tl) {
  if (!worker) return 0;
  uct_iface_config_t* config = nullptr;
  if (uct_md_iface_config_read(md, tl.tl_name, nullptr, nullptr, &config) != UCS_OK) return 0;
  uct_iface_params_t params{};
  params.field_mask = UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_DEVICE;
  params.open_mode = UCT_IFACE_OPEN_MODE_DEVICE;
  params.mode.device.tl_name = tl.tl_name;
  params.mode.device.dev_name = tl.dev_name;
  uct_iface_h iface = nullptr;
  ucs_status_t status = uct_iface_open(md, worker, &params, config, &iface);
  uct_config_release(config);
  if (status != UCS_OK) return 0;
  uct_iface_attr_t attr{};
  float us = uct_iface_query(iface, &attr) == UCS_OK ? static_cast<float>(attr.latency.c * 1e6) : 0;
  uct_iface_close(iface);
  return us;
}

// Every network device UCT lists (with the transports that drive it); sets *cuda when UCX can move
// GPU memory; *all collects every device name UCT knows, to tell a typo in UCX_NET_DEVICES.
std::vector<Device> queryUct(bool* cuda, std::vector<std::string>* all) {
  std::vector<Device> out;
  ucs_async_context_t* async = nullptr;
  uct_worker_h worker = nullptr;
  if (ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &async) == UCS_OK &&
      uct_worker_create(async, UCS_THREAD_MODE_SINGLE, &worker) != UCS_OK)
    worker = nullptr;

  uct_component_h* components = nullptr;
  unsigned ncomponents = 0;
  ucs_status_t status = uct_query_components(&components, &ncomponents);
  if (status != UCS_OK) {
    UCX_WARN("UCX could not list its components (%s); check the UCX installation (ucx_info -d)",
             ucs_status_string(status));
    ncomponents = 0;
  }
  for (unsigned c = 0; c < ncomponents; c++) {
    uct_component_attr_t cattr{};
    cattr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME | UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    if (uct_component_query(components[c], &cattr) != UCS_OK) continue;
    std::vector<uct_md_resource_desc_t> mds(cattr.md_resource_count);
    cattr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    cattr.md_resources = mds.data();
    if (mds.empty() || uct_component_query(components[c], &cattr) != UCS_OK) continue;
    for (const uct_md_resource_desc_t& mdDesc : mds) {
      uct_md_config_t* mdConfig = nullptr;
      if (uct_md_config_read(components[c], nullptr, nullptr, &mdConfig) != UCS_OK) continue;
      uct_md_h md = nullptr;
      status = uct_md_open(components[c], mdDesc.md_name, mdConfig, &md);
      uct_config_release(mdConfig);
      if (status != UCS_OK) continue;
      uct_tl_resource_desc_t* tls = nullptr;
      unsigned ntls = 0;
      if (uct_md_query_tl_resources(md, &tls, &ntls) == UCS_OK) {
        for (unsigned t = 0; t < ntls; t++) {
          const uct_tl_resource_desc_t& tl = tls[t];
          all->push_back(tl.dev_name);
          if (tl.dev_type == UCT_DEVICE_TYPE_ACC && strncmp(tl.tl_name, "cuda", 4) == 0) *cuda = true;
          if (tl.dev_type != UCT_DEVICE_TYPE_NET) continue;
          auto it = std::find_if(out.begin(), out.end(), [&](const Device& d) { return d.name == tl.dev_name; });
          if (it == out.end()) {
            it = out.emplace(out.end());
            it->name = tl.dev_name;
          }
          it->transports.push_back(tl.tl_name);
          float us = transportLatencyUs(md, worker, tl);
          if (us > 0 && (it->latencyUs == 0 || us < it->latencyUs)) it->latencyUs = us;
        }
        uct_release_tl_resource_list(tls);
      }
      uct_md_close(md);
    }
  }
  if (components) uct_release_component_list(components);
  if (worker) uct_worker_destroy(worker);
  if (async) ucs_async_context_destroy(async);
  return out;
}

// sysfs facts and the handshake address of one device.
void describe(Device& d, const std::map<std::string, InterfaceAddress>& addrs) {
  std::vector<std::string> netdevs;  // interfaces whose address the handshake socket may use
  std::string net = "/sys/class/net/" + d.name;
  size_t colon = d.name.rfind(':');
  std::string ib = colon == std::string::npos ? "" : "/sys/class/infiniband/" + d.name.substr(0, colon);
  if (!firstLine(net + "/type").empty()) {
    d.pciPath = realPath(net + "/device");
    d.speedMbps = atoi(firstLine(net + "/speed").c_str());
    d.guid = hexDigits(firstLine(net + "/address"));
    netdevs.push_back(d.name);
  } else if (!ib.empty() && !firstLine(ib + "/node_guid").empty()) {
    d.port = atoi(d.name.c_str() + colon + 1);
    d.pciPath = realPath(ib + "/device");
    d.guid = hexDigits(firstLine(ib + "/node_guid"));
    // "100 Gb/sec (4X EDR)"
    d.speedMbps =
        static_cast<int>(strtod(firstLine(ib + "/ports/" + std::to_string(d.port) + "/rate").c_str(), nullptr) * 1000);
    if (DIR* dir = opendir((ib + "/device/net").c_str())) {
      while (dirent* e = readdir(dir))
        if (e->d_name[0] != '.') netdevs.push_back(e->d_name);
      closedir(dir);
    }
  }
  if (d.speedMbps <= 0) d.speedMbps = kFallbackSpeedMbps;
  if (d.guid == 0) d.guid = fnv1a(d.name);

  for (const std::string& n : netdevs) {
    auto it = addrs.find(n);
    if (it != addrs.end()) {
      d.addr = it->second.addr;
      d.addrSource = n;
      return;
    }
  }
  // No address of its own (an IB port without IPoIB): introduce workers over another interface;
  // only the handshake uses it, the data moves over the device itself.
  const InterfaceAddress* pick = nullptr;
  std::string pickName;
  for (const auto& [name, a] : addrs)
    if (!pick || (pick->loopback && !a.loopback) || (pick->loopback == a.loopback && a.rank < pick->rank)) {
      pick = &a;
      pickName = name;
    }
  if (pick) {
    d.addr = pick->addr;
    d.addrSource = pickName + " (the device has no IP address of its own)";
  }
}

struct Discovery {
  std::vector<Device> devices;
  bool cuda = false;
};

Discovery discover() {
  Discovery out;
  std::vector<std::string> all;
  std::vector<Device> listed = queryUct(&out.cuda, &all);

  const char* env = getenv("UCX_NET_DEVICES");
  std::vector<std::string> wanted = split(env);
  if (wanted.empty() || (wanted.size() == 1 && wanted[0] == "all")) {
    out.devices = std::move(listed);
  } else {
    for (const std::string& w : wanted) {
      auto it = std::find_if(listed.begin(), listed.end(), [&](const Device& d) { return d.name == w; });
      if (it != listed.end())
        out.devices.push_back(std::move(*it));
      else if (std::find(all.begin(), all.end(), w) == all.end())
        UCX_WARN("UCX_NET_DEVICES names \"%s\", a device UCX does not know (ucx_info -d lists them); ignored",
                 w.c_str());
    }
  }

  std::map<std::string, InterfaceAddress> addrs = interfaceAddresses();
  for (Device& d : out.devices) describe(d, addrs);
  if (out.devices.empty())
    UCX_WARN("UCX lists no network device%s%s; the UCX net plugin offers none (ucx_info -d shows what UCX sees)",
             env ? " among UCX_NET_DEVICES=" : "", env ? env : "");
  for (size_t i = 0; i < out.devices.size(); i++) {
    const Device& d = out.devices[i];
    std::string tls;
    for (const std::string& t : d.transports) tls += (tls.empty() ? "" : ",") + t;
    UCX_INFO(
        NCCL_INIT | NCCL_NET, "device %zu: %s (UCT %s) pci %s speed %d Mbps latency %.2f us; handshake on %s via %s", i,
        d.name.c_str(), tls.c_str(), d.pciPath.empty() ? "none (virtual)" : d.pciPath.c_str(), d.speedMbps, d.latencyUs,
        sockHost(d.addr).c_str(), d.addrSource.empty() ? "nothing: no interface has an address" : d.addrSource.c_str());
  }
  return out;
}

const Discovery& discovery() {
  static std::once_flag once;
  static Discovery* d;
  std::call_once(once, [] { d = new Discovery(discover()); });  // never freed: props point into it
  return *d;
}

}  // namespace

const std::vector<Device>& devices() { return discovery().devices; }
bool ucxSupportsCuda() { return discovery().cuda; }

}  // namespace plexus::net_ucx
