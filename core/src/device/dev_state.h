// What CUDA kernels read of a communicator (layer 6 ↔ 3): plexusDevComm_v1_t in device memory; its channels in
// host-mapped memory, where kernels write their status and waits for the watchdog and hang reports to read; every
// channel's connectors (peers), ring orders and tree parents in device memory; the abort word in host-mapped memory.
// Made once the connections of init exist; the connectors point-to-point adds later are copied as they connect. The
// host backend's kernels use the host copies themselves: none of this exists there.
#pragma once

#include <nccl.h>

#include <vector>

#include "device/runtime.h"

struct ncclComm;

namespace plexus {

struct DeviceState {
  DeviceMem devComm;   // Device: plexusDevComm_v1_t
  DeviceMem channels;  // HostMapped: plexusDevChannel_v1_t[nChannels]
  DeviceMem peers;     // Device: plexusDevChannelPeer_v1_t[nChannels][nRanks]
  DeviceMem orders;    // Device: int[nChannels][nRanks] ring orders, then int[nChannels][nRanks] tree parents
  DeviceMem abort;     // HostMapped: uint32_t
};

// The abort word kernels watch, before anything else of the device state (an abort during init reaches it).
ncclResult_t devStateInitAbort(ncclComm* comm);
// Everything else, from the host copies of init; sets comm->devCommForKernels and comm->channels.live.
ncclResult_t devStateInit(ncclComm* comm);
// Copies the connectors of `channel` with the given peers to device memory (new ones: no kernel reads them yet).
ncclResult_t devStateSyncConnectors(ncclComm* comm, int channel, const std::vector<int>& peers);
void devStateFree(ncclComm* comm);

}  // namespace plexus
