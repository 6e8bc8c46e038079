// net-ucx: the network devices UCX can use, as the plugin's devices 0..n-1.
//
// UCT lists every network device a transport can drive ("eth0" and "lo" for tcp, "mlx5_0:1" for
// the verbs transports); UCX_NET_DEVICES, when set to names rather than "all", keeps those (in its
// order). Properties come from sysfs (PCI path, speed, MAC or node GUID) and from UCT (latency).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "socket.h"

namespace plexus::net_ucx {

struct Device {
  std::string name;                     // UCX's name: "eth0", "lo", "mlx5_0:1"
  std::string pciPath;                  // realpath of its PCI device; empty when virtual
  std::vector<std::string> transports;  // UCT transports that drive it: "tcp", "rc_mlx5", ...
  uint64_t guid = 0;                    // MAC address or IB node GUID: one port, one guid
  int speedMbps = 0;
  int port = 0;  // IB port; 0 for an Ethernet interface
  float latencyUs = 0;
  SockAddr addr{};         // where listen() on this device waits for connections (port 0)
  std::string addrSource;  // which interface that address belongs to, for the log
};

// Discovered once per process (thread safe); empty when UCX lists no usable network device.
const std::vector<Device>& devices();
// Whether UCX can move CUDA memory (built with CUDA, and a GPU present).
bool ucxSupportsCuda();

}  // namespace plexus::net_ucx
