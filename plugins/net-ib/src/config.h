// net-ib: the choices made before any verbs call, as pure functions so that they are unit-tested without a device:
// which HCAs and ports NCCL_IB_HCA lets through, which GID a RoCE port uses, how a message is split over the queue
// pairs of a connection, and the knobs read once per process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace plexus::net_ib {

// NCCL_IB_HCA as NCCL reads it: "mlx5_0:1,mlx5_1" keeps those (port 1 of mlx5_0, every port of mlx5_1); names are
// prefixes ("mlx5" keeps mlx5_0, mlx5_10, ...) unless the list starts with '='; a leading '^' excludes instead.
// "^=mlx5_3" excludes exactly mlx5_3. Empty or unset: every device and port.
struct HcaFilter {
  struct Entry {
    std::string name;
    int port = -1;  // -1: any port
  };
  bool exclude = false;
  bool exact = false;
  std::vector<Entry> entries;

  static HcaFilter parse(const char* text);  // nullptr or "" is the filter that keeps everything
  bool keeps(const std::string& device, int port) const;
  std::string describe() const;  // "all", "mlx5_0:1,mlx5_1", "all but =mlx5_3"
};

// One entry of a port's GID table, as sysfs and ibv_query_gid tell it.
enum class GidType { Ib, RoceV1, RoceV2, Unknown };
struct GidEntry {
  int index = 0;
  uint8_t raw[16] = {};
  GidType type = GidType::Unknown;
};
bool gidIsZero(const GidEntry& g);
bool gidIsIpv4(const GidEntry& g);       // ::ffff:a.b.c.d
bool gidIsLinkLocal(const GidEntry& g);  // fe80::/64
std::string gidText(const GidEntry& g);  // "::ffff:10.0.0.1", "fe80::1"

struct GidPolicy {
  int forcedIndex = -1;  // NCCL_IB_GID_INDEX (>= 0 wins over everything)
  int family = 0;        // NCCL_IB_ADDR_FAMILY: AF_INET (default), AF_INET6
  int roceVersion = 2;   // NCCL_IB_ROCE_VERSION_NUM
};
// The GID a RoCE port uses: the forced index if the table has it, else the first non-zero entry of the wanted
// RoCE version and address family (IPv6 link-local addresses last), else the first of that version, else one of
// unknown type (no sysfs) in that family, else any non-zero entry. Returns -1 with *why saying what the table lacked. InfiniBand ports use index 0 (routing by LID).
int chooseGid(const std::vector<GidEntry>& table, bool infiniband, const GidPolicy& policy, std::string* why);

// A message over nqps queue pairs: contiguous chunks, each a multiple of `align` bytes but the last, none empty
// unless the message is (then one chunk of 0 bytes on queue pair 0). Chunk q goes on queue pair q, so queue pair 0
// always carries the first chunk. Small messages stay on one queue pair (splitting costs more than it gives).
struct Chunk {
  size_t offset;
  size_t size;
};
// The bytes of every chunk but the last (the whole message when it is one chunk): chunk q starts at q times this.
size_t chunkBytes(size_t size, int nqps, size_t align = 128, size_t minChunk = 16384);
std::vector<Chunk> splitMessage(size_t size, int nqps, size_t align = 128, size_t minChunk = 16384);
int chunkCount(size_t size, int nqps, size_t align = 128, size_t minChunk = 16384);

// A port's speed in Mb/s from ibv_port_attr's active_speed and active_width codes (0 for codes it does not know).
int portSpeedMbps(int activeSpeed, int activeWidth);
// /sys/class/infiniband/<dev>/ports/<port>/gid_attrs/types/<index>: "IB/RoCE v1", "RoCE v2".
GidType gidTypeFromSysfs(const std::string& text, bool infiniband);

struct Knobs {
  HcaFilter hca;         // NCCL_IB_HCA
  GidPolicy gid;         // NCCL_IB_GID_INDEX, NCCL_IB_ADDR_FAMILY, NCCL_IB_ROCE_VERSION_NUM
  int qpsPerConnection;  // NCCL_IB_QPS_PER_CONNECTION (1..16, default 1)
  int timeout;           // NCCL_IB_TIMEOUT: 4.096 µs × 2^timeout (default 20)
  int retryCount;        // NCCL_IB_RETRY_CNT (default 7)
  int serviceLevel;      // NCCL_IB_SL (default 0)
  int trafficClass;      // NCCL_IB_TC (default 0)
  int mtu;               // NCCL_IB_MTU: 0 = the port's active MTU, else 1..5 (256..4096 B)
  bool gdrFlush;         // NCCL_GDR_FLUSH_DISABLE unset: flush GPU receives by an RDMA READ
};
// Read once per process; a knob with a bad value is reported and its default used.
const Knobs& knobs();
// PLEXUS_<name> wins over NCCL_<name>; nullptr when neither is set.
const char* knob(const char* name);

}  // namespace plexus::net_ib
