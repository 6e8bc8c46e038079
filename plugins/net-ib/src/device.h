// net-ib: the RDMA devices this process may use. Each active port of each HCA that NCCL_IB_HCA keeps is one net
// device (as in NCCL), opened once per process with its protection domain, registration cache and a thread that
// reads the HCA's asynchronous events: a port that goes down or a device that fails marks the device, and every
// connection on it fails at its next call with an error naming the device and port.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "config.h"
#include "regcache.h"
#include "verbs.h"

namespace plexus::net_ib {

struct Device {
  std::string name;  // "mlx5_0:1" (HCA and port), as NCCL names it
  std::string hca;
  int port = 1;
  ibv_context* context = nullptr;
  ibv_pd* pd = nullptr;
  int linkLayer = IBV_LINK_LAYER_INFINIBAND;
  uint16_t lid = 0;
  ibv_mtu mtu = IBV_MTU_1024;
  int speedMbps = 0;
  std::string pciPath;  // realpath of /sys/class/infiniband/<hca>/device, or empty
  uint64_t guid = 0;
  int gidIndex = 0;
  ibv_gid gid{};
  int maxQpWr = 0;
  bool gdr = false;     // nvidia-peermem: ibv_reg_mr takes CUDA pointers
  bool dmabuf = false;  // ibv_reg_dmabuf_mr works here
  std::unique_ptr<RegCache> cache;
  std::mutex asyncMutex;
  std::string asyncError;  // set by the event thread: "port 1 went down (IBV_EVENT_PORT_ERR)"
  std::atomic<bool> failed{false};
};

// The devices, found at the first call (a second call returns the same list). When there are none, *why says
// why in one line (no libibverbs, no HCA, none active, all filtered out by NCCL_IB_HCA).
const std::vector<Device*>& devices(std::string* why);

// Why a device failed ("" while it is fine).
std::string deviceError(Device* d);

}  // namespace plexus::net_ib
