// The nets the multinode tests run over: the built-in socket net and each net plugin that was built,
// every one on loopback only.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace nets {

inline std::string inPluginDir(const std::string& file) {
  const char* dir = getenv("PLEXUS_PLUGIN_PATH");
  return std::string(dir ? dir : ".") + "/" + file;
}

// Which net carries the traffic between nodes: "socket" (built in) or a plugin file that must exist.
struct Net {
  std::string name;        // NCCL_NET_PLUGIN's value
  std::string pluginFile;  // empty: built in; a bare file name: in PLEXUS_PLUGIN_PATH, looked up when used
  // The transport the plugin's library should use, on loopback only.
  std::vector<std::pair<const char*, const char*>> env;

  // Resolved at the time of use: the test binary sets PLEXUS_PLUGIN_PATH in main, after static initialisation.
  std::string path() const {
    return pluginFile.empty() || pluginFile.find('/') != std::string::npos ? pluginFile : inPluginDir(pluginFile);
  }
};

inline bool available(const Net& n) { return n.pluginFile.empty() || access(n.path().c_str(), R_OK) == 0; }

// A net plugin of the test tree (tests/plugins, tools/plexus-net-check/test).
inline std::string testPlugin(const std::string& name) {
  return std::string(PLEXUS_TEST_LIB_DIR) + "/../test-plugins/libnccl-net-" + name + ".so";
}

inline const Net kSocket{"socket", "", {}};
inline const Net kUcx{"ucx", "libnccl-net-ucx.so", {{"UCX_TLS", "tcp"}, {"UCX_NET_DEVICES", "lo"}}};
inline const Net kOfi{"ofi", "libnccl-net-ofi.so", {{"FI_PROVIDER", "tcp"}, {"FI_TCP_IFACE", "lo"}}};
inline const Net kIb{"ib", "libnccl-net-ib.so", {}};
// net-ib over the stand-in libibverbs of plugins/net-ib/tests (one RoCE HCA whose RDMA writes are
// process_vm_writev into the peer): the plugin's verbs half end to end, on machines without an HCA.
inline const char* fakeVerbs() {
  static const std::string path = std::string(PLEXUS_TEST_LIB_DIR) + "/test/fake-ibverbs/libibverbs.so.1";
  return path.c_str();
}
inline const Net kIbFake{"ib", "libnccl-net-ib.so", {{"PLEXUS_IB_VERBS_LIBRARY", fakeVerbs()}}};

// An RDMA device (HCA) on this machine, as the kernel lists them.
inline bool haveRdmaDevice() { return system("ls /sys/class/infiniband/* >/dev/null 2>&1") == 0; }

}  // namespace nets
