// The net plugin ABI as the core calls it: NCCL's newest (ncclNet_v12_t's calls), over whichever
// version a plugin exports, v12 down to v6. One adapter per version (net_vN.cc, as NCCL's
// src/plugin/net/), so nothing else in the core, the net transport or plexus-net-check ever sees an
// older table.
//
// Semantics are v12's (nccl-abi.md §2): init makes a context per communicator, listen and connect take
// it, finalize ends it. For v6..v10 plugins, which have one global init, the adapter calls that init
// once (reference counted across contexts) and finalize is a no-op until the last context goes.
// Optional members a plugin leaves NULL are reported by has*() and never called.
#pragma once

#include <plexus/net.h>

#include <memory>
#include <string>
#include <vector>

namespace plexus {

class NetApi {
 public:
  virtual ~NetApi() = default;
  virtual ncclResult_t init(void** ctx, uint64_t commId, ncclNetCommConfig_v12_t* config,
                            ncclDebugLogger_t logger) = 0;
  virtual ncclResult_t finalize(void* ctx) = 0;
  virtual ncclResult_t devices(int* ndev) = 0;
  // Older property layouts are widened: fields a version lacks get NCCL's defaults (regIsGlobal 0,
  // forceFlush 0, vProps {1, {dev}}, maxP2pBytes/maxCollBytes MAX_NET_SIZE for int-size plugins,
  // maxMultiRequestSize 1, railId/planeId NCCL_NET_ID_UNDEF).
  virtual ncclResult_t getProperties(int dev, ncclNetProperties_v12_t* props) = 0;
  virtual ncclResult_t listen(void* ctx, int dev, void* handle, void** listenComm) = 0;
  // Device offload is never asked for: the device handle passed is NULL.
  virtual ncclResult_t connect(void* ctx, int dev, void* handle, void** sendComm) = 0;
  virtual ncclResult_t accept(void* listenComm, void** recvComm) = 0;
  virtual ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) = 0;
  virtual ncclResult_t deregMr(void* comm, void* mhandle) = 0;
  // Optional in every version (NULL in many plugins): ncclInvalidUsage where the plugin has none.
  virtual ncclResult_t regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                                   void** mhandle) = 0;
  // Sizes above what an int-size plugin (v6..v8) takes are refused with ncclInvalidArgument; the
  // caller splits by maxP2pBytes/maxCollBytes, which the adapter sets to MAX_NET_SIZE for them.
  // phandle(s): the profiler handles of the steps (NULL: none), passed to v10+ plugins as NCCL does.
  virtual ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                             void** request) = 0;
  virtual ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                             void** phandles, void** request) = 0;
  virtual ncclResult_t iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) = 0;
  virtual ncclResult_t test(void* request, int* done, int* sizes) = 0;
  virtual ncclResult_t closeSend(void* sendComm) = 0;
  virtual ncclResult_t closeRecv(void* recvComm) = 0;
  virtual ncclResult_t closeListen(void* listenComm) = 0;
  virtual bool hasIrecvConsumed() const { return false; }
  virtual ncclResult_t irecvConsumed(void* recvComm, int n, void* request) { return ncclSuccess; }
};

// A net plugin, opened once per process and kept for its life.
struct NetPlugin {
  std::string name;   // its table's name ("Socket", "UCX", ...)
  std::string path;   // the file, or "built-in"
  int version = 0;    // the ABI version in use: the newest the file exports
  std::unique_ptr<NetApi> api;
  std::string label;  // "net plugin UCX (/path/libnccl-net-ucx.so, v12)", for logs and errors
};

// Adapters over the table a plugin's ncclNetPlugin_vN symbol points at. nullptr, with *why set, when
// a required member is NULL.
std::unique_ptr<NetApi> netAdapt_v6(const void* table, std::string* why);
std::unique_ptr<NetApi> netAdapt_v7(const void* table, std::string* why);
std::unique_ptr<NetApi> netAdapt_v8(const void* table, std::string* why);
std::unique_ptr<NetApi> netAdapt_v9(const void* table, std::string* why);
std::unique_ptr<NetApi> netAdapt_v10(const void* table, std::string* why);
std::unique_ptr<NetApi> netAdapt_v11(const void* table, std::string* why);
std::unique_ptr<NetApi> netAdapt_v12(const void* table, std::string* why);

// Opens the net plugin file `spec` names, once per process: a path, or a name tried as given and then
// as libnccl-net-<name>.so (dlopen's search, then PLEXUS_PLUGIN_PATH and the folders beside
// libplexus.so), taking the newest ncclNetPlugin_vN it exports (v12 .. v6). nullptr when it cannot
// be used; *report gets the one line that says what was tried and loaded, or why not (the same line
// on every call for spec).
const NetPlugin* netPluginOpen(const std::string& spec, std::string* report);

// The built-in socket net (core/src/transport/net/socket_net.cc), as a plugin of the list.
const NetPlugin* netPluginSocket();

// The net plugins NCCL_NET_PLUGIN names (else `fallback`, the configuration's plugins.net): the spec a
// communicator's net transport and the lookups below take.
std::string netPluginSpec(const std::string& fallback);

// The library of the first net plugin `pluginSpec` names that opens (libnccl-net.so when empty; none for "none"),
// opened once more for the caller (it stays open): where NCCL looks for a tuner or a profiler whose own library is
// not found (aws-ofi-nccl ships its tuner inside its net plugin). nullptr when none opens; *path is the file.
void* netPluginLibrary(const std::string& pluginSpec, std::string* path);

// The net plugin a communicator uses, chosen as NCCL chooses: the external plugins pluginSpec names
// (NCCL_NET_PLUGIN's syntax: comma-separated names or paths; empty: libnccl-net.so if present; "none":
// no external plugin), then the built-in socket net; with netName (NCCL_NET, or ncclConfig_t.netName)
// only one whose table is named so (case-insensitively). Each candidate is initialised (a context for
// commId) and asked for devices; one that fails or has none is skipped with one line saying why, and
// the first that works is chosen (*ctx is its context; *report says what was chosen and skipped). No
// plugin left is an error naming every candidate and why it was skipped.
ncclResult_t netPluginChoose(const std::string& pluginSpec, const std::string& netName, uint64_t commId,
                             const ncclNetCommConfig_v12_t& config, ncclDebugLogger_t logger, const NetPlugin** out,
                             void** ctx, std::string* report);

}  // namespace plexus
