#include "config.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>

#include "log.h"

namespace plexus::net_ib {

HcaFilter HcaFilter::parse(const char* text) {
  HcaFilter f;
  if (!text) return f;
  const char* p = text;
  if (*p == '^') f.exclude = true, p++;
  if (*p == '=') f.exact = true, p++;
  std::string s(p);
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    std::string item = s.substr(start, end - start);
    if (!item.empty()) {
      Entry e;
      const size_t colon = item.find(':');
      e.name = item.substr(0, colon);
      if (colon != std::string::npos) {
        char* stop = nullptr;
        long port = strtol(item.c_str() + colon + 1, &stop, 10);
        e.port = (stop && *stop == '\0' && port > 0 && port < 256) ? (int)port : -1;
      }
      if (!e.name.empty()) f.entries.push_back(e);
    }
    start = end + 1;
  }
  return f;
}

bool HcaFilter::keeps(const std::string& device, int port) const {
  if (entries.empty()) return true;
  bool listed = false;
  for (const Entry& e : entries) {
    const bool nameMatches = exact ? device == e.name : device.compare(0, e.name.size(), e.name) == 0;
    if (nameMatches && (e.port < 0 || e.port == port)) listed = true;
  }
  return exclude ? !listed : listed;
}

std::string HcaFilter::describe() const {
  if (entries.empty()) return "all";
  std::string list = exact ? "=" : "";
  for (size_t i = 0; i < entries.size(); i++) {
    list += (i ? "," : "") + entries[i].name;
    if (entries[i].port > 0) list += ":" + std::to_string(entries[i].port);
  }
  return exclude ? "all but " + list : list;
}

bool gidIsZero(const GidEntry& g) {
  for (uint8_t b : g.raw)
    if (b) return false;
  return true;
}
bool gidIsIpv4(const GidEntry& g) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return memcmp(g.raw, prefix, sizeof prefix) == 0;
}
bool gidIsLinkLocal(const GidEntry& g) { return g.raw[0] == 0xfe && (g.raw[1] & 0xc0) == 0x80; }

std::string gidText(const GidEntry& g) {
  char text[INET6_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET6, g.raw, text, sizeof text);
  return text;
}

int chooseGid(const std::vector<GidEntry>& table, bool infiniband, const GidPolicy& policy, std::string* why) {
  if (policy.forcedIndex >= 0) {
    for (const GidEntry& g : table)
      if (g.index == policy.forcedIndex && !gidIsZero(g)) return g.index;
    *why = "NCCL_IB_GID_INDEX=" + std::to_string(policy.forcedIndex) + " names no populated entry of the GID table";
    return -1;
  }
  if (infiniband) return 0;
  const GidType wanted = policy.roceVersion == 1 ? GidType::RoceV1 : GidType::RoceV2;
  const int family = policy.family ? policy.family : AF_INET;
  auto familyOf = [](const GidEntry& g) { return gidIsIpv4(g) ? AF_INET : AF_INET6; };
  // Best first: version and family, global before link-local; then version alone; then anything populated.
  int best = -1, bestRank = 99;
  for (const GidEntry& g : table) {
    if (gidIsZero(g)) continue;
    // Without a type (sysfs unreadable) the address family still decides.
    const bool sameFamily = familyOf(g) == family;
    int rank = 5;
    if (g.type == wanted && sameFamily)
      rank = gidIsLinkLocal(g) ? 1 : 0;
    else if (g.type == wanted)
      rank = 2;
    else if (g.type == GidType::Unknown && sameFamily)
      rank = gidIsLinkLocal(g) ? 4 : 3;
    if (rank < bestRank) best = g.index, bestRank = rank;
  }
  if (best < 0) *why = "the port's GID table has no populated entry (is an IP address configured on its netdev?)";
  return best;
}

size_t chunkBytes(size_t size, int nqps, size_t align, size_t minChunk) {
  if (size == 0 || nqps <= 1) return size;
  size_t per = (size + nqps - 1) / nqps;
  if (per < minChunk) per = minChunk;
  per = (per + align - 1) / align * align;
  return per < size ? per : size;
}

int chunkCount(size_t size, int nqps, size_t align, size_t minChunk) {
  const size_t per = chunkBytes(size, nqps, align, minChunk);
  return per ? (int)((size + per - 1) / per) : 1;
}

std::vector<Chunk> splitMessage(size_t size, int nqps, size_t align, size_t minChunk) {
  const size_t per = chunkBytes(size, nqps, align, minChunk);
  if (per == 0) return {{0, 0}};
  std::vector<Chunk> chunks;
  for (size_t off = 0; off < size; off += per) chunks.push_back({off, size - off < per ? size - off : per});
  return chunks;
}

int portSpeedMbps(int activeSpeed, int activeWidth) {
  int lane = 0;
  switch (activeSpeed) {
    case 1:
      lane = 2500;
      break;  // SDR
    case 2:
      lane = 5000;
      break;  // DDR
    case 4:
      lane = 10000;
      break;  // QDR
    case 8:
      lane = 10000;
      break;  // FDR10
    case 16:
      lane = 14000;
      break;  // FDR
    case 32:
      lane = 25000;
      break;  // EDR
    case 64:
      lane = 50000;
      break;  // HDR
    case 128:
      lane = 100000;
      break;  // NDR
    case 256:
      lane = 200000;
      break;  // XDR
  }
  int lanes = 0;
  switch (activeWidth) {
    case 1:
      lanes = 1;
      break;
    case 2:
      lanes = 4;
      break;
    case 4:
      lanes = 8;
      break;
    case 8:
      lanes = 12;
      break;
    case 16:
      lanes = 2;
      break;
  }
  return lane * lanes;
}

GidType gidTypeFromSysfs(const std::string& text, bool infiniband) {
  if (infiniband) return GidType::Ib;
  if (text.find("RoCE v2") != std::string::npos) return GidType::RoceV2;
  if (text.find("v1") != std::string::npos) return GidType::RoceV1;
  return GidType::Unknown;
}

const char* knob(const char* name) {
  for (const char* prefix : {"PLEXUS_", "NCCL_"}) {
    const char* v = getenv((std::string(prefix) + name).c_str());
    if (v && *v) return v;
  }
  return nullptr;
}

namespace {
int knobInt(const char* name, int fallback, int lo, int hi) {
  const char* v = knob(name);
  if (!v) return fallback;
  char* end = nullptr;
  long x = strtol(v, &end, 0);
  if (end == v || *end != '\0' || x < lo || x > hi) {
    IB_WARN("NCCL_%s=\"%s\" is not an integer in [%d, %d]; using %d", name, v, lo, hi, fallback);
    return fallback;
  }
  return (int)x;
}
}  // namespace

const Knobs& knobs() {
  static const Knobs k = [] {
    Knobs k;
    k.hca = HcaFilter::parse(knob("IB_HCA"));
    k.gid.forcedIndex = knobInt("IB_GID_INDEX", -1, -1, 65535);
    const char* family = knob("IB_ADDR_FAMILY");
    k.gid.family = AF_INET;
    if (family && !strcmp(family, "AF_INET6"))
      k.gid.family = AF_INET6;
    else if (family && strcmp(family, "AF_INET") != 0)
      IB_WARN("NCCL_IB_ADDR_FAMILY=\"%s\" is neither AF_INET nor AF_INET6; using AF_INET", family);
    k.gid.roceVersion = knobInt("IB_ROCE_VERSION_NUM", 2, 1, 2);
    k.qpsPerConnection = knobInt("IB_QPS_PER_CONNECTION", 1, 1, 16);
    k.timeout = knobInt("IB_TIMEOUT", 20, 1, 31);
    k.retryCount = knobInt("IB_RETRY_CNT", 7, 0, 7);
    k.serviceLevel = knobInt("IB_SL", 0, 0, 15);
    k.trafficClass = knobInt("IB_TC", 0, 0, 255);
    k.mtu = knobInt("IB_MTU", 0, 0, 5);
    k.gdrFlush = knobInt("GDR_FLUSH_DISABLE", 0, 0, 1) == 0;
    return k;
  }();
  return k;
}

}  // namespace plexus::net_ib
