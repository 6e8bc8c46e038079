// p2p-nvlink's CUDA connections (plexusPeerInfo_v1_t.backend == 1): the same ownership as on the host backend (the
// receiver owns the slots, tail and connFifo; the sender the head and the zero-copy record; each side maps the
// other's memory), in the CUDA memory of cuda_memory.h, every pointer of the connector being one the rank's kernels
// can use on its own device.
//
// Ranks of one process decide everything at setup (they share device ordinals): device memory where the two devices
// reach each other (peer access enabled at connect; PLEXUS_CONN_P2P_SAME_SPACE), mapped host memory otherwise.
// Ranks of two processes cannot know at setup whether their GPUs reach each other (device ordinals differ between
// processes; the connect info carries PCI bus ids), so each offers device memory (cuMem, else legacy IPC; host memory
// under PLEXUS_P2P_DISABLE) and connect settles it over the process mailbox (fd_mailbox.h), polled, never blocking:
//   phase 0: each side sends its memory's descriptor (cuMem: the file descriptor) and takes the peer's;
//   phase 1: each tries to map the peer's memory (after cuDeviceCanAccessPeer where both GPUs are visible) and says
//            whether it could;
//   phase 2: a side whose memory the peer could not map moves it to registered /dev/shm memory and sends its name.
// A peer that dies or never answers ends connect with an error (its pid is gone, or PLEXUS_P2P_CONNECT_TIMEOUT).
//
// P2P read mode (PLEXUS_P2P_READ=1, NCCL_P2P_READ_ENABLE=1; every rank alike): the Simple buffer lives in the sender's
// memory, after its control block; the sender's kernels write it locally and the receiver's read it across. The
// primitives need nothing new: they write the send connector's buffs[] and read the recv connector's.
#pragma once

#include <plexus/transport_v1.h>

#include <string>

#include "cuda_memory.h"

namespace p2p {

constexpr uint32_t kCudaInfoMagic = 0x55435850;  // "PXCU"
constexpr uint16_t kCudaInfoVersion = 1;
constexpr uint16_t kCudaRoleRecv = 1;
constexpr uint16_t kCudaRoleSend = 2;
constexpr uint32_t kCudaInfoRead = 0x1;  // P2P read mode: the Simple buffer is the sender's

// One side's connect info on the CUDA backend.
struct CudaInfo {
  uint32_t magic;
  uint16_t version;
  uint16_t role;
  uint32_t flags;
  int32_t device;    // CUDA ordinal in the owner's process (for messages)
  char busId[16];    // the owner's GPU
  uint64_t mailbox;  // the owner's process mailbox; 0 for a peer of this process
  uint64_t pidNs;    // the owner's pid namespace: whether its pid can be watched from here
  CudaHandle mem;
  uint64_t buffOffset[PLEXUS_NUM_PROTOCOLS];  // in mem, for the buffers this side holds
  int32_t buffSizes[PLEXUS_NUM_PROTOCOLS];    // 0 for a protocol whose buffer this side does not hold
  int32_t pad0;
};
static_assert(sizeof(CudaInfo) <= PLEXUS_CONNECT_INFO_BYTES, "CUDA connect info fits plexusConnectInfo_v1_t");

// Whether the sending (isSend) or receiving side holds protocol proto's buffer.
inline bool cudaHolds(bool isSend, bool readMode, int proto) {
  return (proto == PLEXUS_PROTO_SIMPLE && readMode) == isSend;
}
void cudaInfoEncode(const CudaInfo& info, plexusConnectInfo_v1_t* raw);
// The peer's info, checked, for this side (isSend) of a connection of this process or not, with these buffer sizes
// and read mode; false and *why where it is malformed or does not match this side.
bool cudaInfoDecode(const plexusConnectInfo_v1_t& raw, bool isSend, bool sameProcess,
                    const int buffSizes[PLEXUS_NUM_PROTOCOLS], bool readMode, CudaInfo* out, std::string* why);

// canConnect's rule for two CUDA ranks: one machine (same host identity and same machine), and, across processes, one
// /dev/shm (the host-memory fallback) .
bool cudaCanConnect(const plexusPeerInfo_v1_t* self, const plexusPeerInfo_v1_t* peer);

struct CudaConn;
ncclResult_t cudaSetup(bool isSend, const plexusTransportSetup_v1_t* setup, plexusConnectInfo_v1_t* info,
                       CudaConn** out);
// ncclInProgress until the peer process's messages arrived (see the top).
ncclResult_t cudaConnect(CudaConn* c, const plexusConnectInfo_v1_t* peerInfo, plexusConnInfo_v1_t* conn);
void cudaConnected(CudaConn* c);
void cudaFree(CudaConn* c);

}  // namespace p2p
