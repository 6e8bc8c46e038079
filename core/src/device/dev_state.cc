#include "device/dev_state.h"

#include <cstring>

#include "comm/communicator.h"
#include "misc/check.h"

namespace plexus {

namespace {

ncclResult_t allocate(ncclComm* comm, MemKind kind, size_t bytes, DeviceMem* mem, const char* what) {
  if (comm->runtime->alloc(kind, bytes, mem) != ncclSuccess)
    return setError(comm, ncclUnhandledCudaError, "rank %d: cannot allocate %zu bytes of %s on CUDA device %d: %s",
                    comm->rank, bytes, what, comm->device, comm->runtime->lastError().c_str());
  return ncclSuccess;
}

ncclResult_t copy(ncclComm* comm, void* dst, const void* src, size_t bytes, const char* what) {
  if (comm->runtime->copyToDevice(dst, src, bytes) != ncclSuccess)
    return setError(comm, ncclUnhandledCudaError, "rank %d: cannot copy %s to CUDA device %d: %s", comm->rank, what,
                    comm->device, comm->runtime->lastError().c_str());
  return ncclSuccess;
}

plexusDevChannelPeer_v1_t* devicePeers(ncclComm* comm, int channel) {
  return static_cast<plexusDevChannelPeer_v1_t*>(comm->deviceState->peers.ptr) + (size_t)channel * comm->nRanks;
}

}  // namespace

ncclResult_t devStateInitAbort(ncclComm* comm) {
  comm->deviceState = std::make_unique<DeviceState>();
  DeviceState& d = *comm->deviceState;
  NCCLCHECK(allocate(comm, MemKind::HostMapped, sizeof(uint32_t), &d.abort, "the abort flag"));
  auto* word = static_cast<volatile uint32_t*>(d.abort.host);
  // Published first, then the flag copied: an abort in between writes both, one before finds its value copied.
  comm->abortMirror.store(word);
  __atomic_store_n(word, __atomic_load_n(&comm->abortFlag, __ATOMIC_SEQ_CST), __ATOMIC_SEQ_CST);
  return ncclSuccess;
}

ncclResult_t devStateInit(ncclComm* comm) {
  DeviceState& d = *comm->deviceState;
  const int nch = comm->channels.count, n = comm->nRanks;
  NCCLCHECK(allocate(comm, MemKind::HostMapped, sizeof(plexusDevChannel_v1_t) * nch, &d.channels, "channels"));
  NCCLCHECK(allocate(comm, MemKind::Device, sizeof(plexusDevChannelPeer_v1_t) * nch * n, &d.peers, "connectors"));
  NCCLCHECK(allocate(comm, MemKind::Device, sizeof(int) * 2 * nch * n, &d.orders, "ring and tree orders"));
  NCCLCHECK(allocate(comm, MemKind::Device, sizeof(plexusDevComm_v1_t), &d.devComm, "the device communicator"));
  std::vector<int> orders(2 * (size_t)nch * n, -1);
  int* devOrders = static_cast<int*>(d.orders.ptr);
  auto* channels = static_cast<plexusDevChannel_v1_t*>(d.channels.host);
  for (int c = 0; c < nch; c++) {
    plexusDevChannel_v1_t ch = comm->channels.dev[c];
    if (!comm->channels.ringOrder[c].empty())
      memcpy(&orders[(size_t)c * n], comm->channels.ringOrder[c].data(), sizeof(int) * n);
    if (!comm->channels.treeParents[c].empty())
      memcpy(&orders[(size_t)(nch + c) * n], comm->channels.treeParents[c].data(), sizeof(int) * n);
    ch.ring.userRanks = devOrders + (size_t)c * n;
    ch.tree.parents = devOrders + (size_t)(nch + c) * n;
    ch.peers = devicePeers(comm, c);
    channels[c] = ch;
    NCCLCHECK(copy(comm, devicePeers(comm, c), comm->channels.peers[c].data(), sizeof(plexusDevChannelPeer_v1_t) * n,
                   "connectors"));
  }
  NCCLCHECK(copy(comm, d.orders.ptr, orders.data(), sizeof(int) * orders.size(), "ring and tree orders"));
  plexusDevComm_v1_t dc = comm->devComm;
  dc.abortFlag = static_cast<volatile uint32_t*>(d.abort.ptr);
  dc.channels = static_cast<plexusDevChannel_v1_t*>(d.channels.ptr);
  NCCLCHECK(copy(comm, d.devComm.ptr, &dc, sizeof(dc), "the device communicator"));
  comm->devCommForKernels = static_cast<plexusDevComm_v1_t*>(d.devComm.ptr);
  comm->channels.live = channels;
  return ncclSuccess;
}

ncclResult_t devStateSyncConnectors(ncclComm* comm, int channel, const std::vector<int>& peers) {
  for (int p : peers)
    NCCLCHECK(copy(comm, devicePeers(comm, channel) + p, &comm->channels.peers[channel][p],
                   sizeof(plexusDevChannelPeer_v1_t), "a connector"));
  return ncclSuccess;
}

void devStateFree(ncclComm* comm) {
  if (!comm->deviceState) return;
  DeviceState& d = *comm->deviceState;
  // The kernels are gone: nothing watches the mapped word any more.
  comm->abortMirror.store(nullptr);
  comm->channels.live = comm->channels.dev.data();
  for (DeviceMem* m : {&d.devComm, &d.channels, &d.peers, &d.orders, &d.abort})
    if (m->ptr) comm->runtime->free(m);
  comm->deviceState.reset();
}

}  // namespace plexus
