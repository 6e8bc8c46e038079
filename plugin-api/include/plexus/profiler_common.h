/*
 * NCCL profiler plugin ABI: what every version (profiler_v1.h .. profiler_v6.h) shares. Values are NCCL's
 * (2.23-2.30, src/include/plugin/nccl_profiler.h), so a profiler built against NCCL's headers and one built against
 * these agree bit for bit.
 *
 * A profiler stores the event types it wants, as a mask of ncclProfile* bits, into the int its init receives
 * (process-wide, starting at 0; it may keep the pointer and change the value later). An event is also emitted when
 * the bit of one of its descendants is set. startEvent must always write *eHandle (NULL: not interested); stopEvent
 * and recordEventState must tolerate NULL. Calls arrive concurrently from the application's threads and the runtime's
 * (proxy, executor, net). C99.
 */
#ifndef PLEXUS_PROFILER_COMMON_H_
#define PLEXUS_PROFILER_COMMON_H_

#include <stdint.h>

#include "net_common.h"
#include "types.h"

/* Event types: the descriptor's `type` and the bits of the activation mask. */
enum {
  ncclProfileGroup = (1 << 0),
  ncclProfileColl = (1 << 1),
  ncclProfileP2p = (1 << 2),
  ncclProfileProxyOp = (1 << 3),
  ncclProfileProxyStep = (1 << 4),
  ncclProfileProxyCtrl = (1 << 5),
  ncclProfileKernelCh = (1 << 6),   /* v3 */
  ncclProfileNetPlugin = (1 << 7),  /* v3 */
  ncclProfileGroupApi = (1 << 8),   /* v5 */
  ncclProfileCollApi = (1 << 9),    /* v5 */
  ncclProfileP2pApi = (1 << 10),    /* v5 */
  ncclProfileKernelLaunch = (1 << 11), /* v5 */
  ncclProfileCeColl = (1 << 12),    /* v6 */
  ncclProfileCeSync = (1 << 13),    /* v6 */
  ncclProfileCeBatch = (1 << 14)    /* v6 */
};

/* Event states (recordEventState). One 4-byte enum for every version; the older ones know fewer values. */
typedef enum {
  ncclProfilerProxyOpSendPosted = 0,
  ncclProfilerProxyOpSendRemFifoWait = 1,
  ncclProfilerProxyOpSendTransmitted = 2,
  ncclProfilerProxyOpSendDone = 3,
  ncclProfilerProxyOpRecvPosted = 4,
  ncclProfilerProxyOpRecvReceived = 5,
  ncclProfilerProxyOpRecvTransmitted = 6,
  ncclProfilerProxyOpRecvDone = 7,
  ncclProfilerProxyStepSendGPUWait = 8,
  ncclProfilerProxyStepSendWait = 9,
  ncclProfilerProxyStepRecvWait = 10,
  ncclProfilerProxyStepRecvFlushWait = 11,
  ncclProfilerProxyStepRecvGPUWait = 12,
  ncclProfilerProxyCtrlIdle = 13,
  ncclProfilerProxyCtrlActive = 14,
  ncclProfilerProxyCtrlSleep = 15,
  ncclProfilerProxyCtrlWakeup = 16,
  ncclProfilerProxyCtrlAppend = 17,
  ncclProfilerProxyCtrlAppendEnd = 18,
  ncclProfilerProxyOpInProgress_v4 = 19,
  ncclProfilerProxyStepSendPeerWait_v4 = 20,
  ncclProfilerNetPluginUpdate = 21,
  ncclProfilerKernelChStop = 22,
  ncclProfilerGroupStartApiStop = 23,
  ncclProfilerGroupEndApiStart = 24,
  ncclProfilerCeCollStart = 25,
  ncclProfilerCeCollComplete = 26,
  ncclProfilerCeSyncStart = 27,
  ncclProfilerCeSyncComplete = 28,
  ncclProfilerCeBatchStart = 29,
  ncclProfilerCeBatchComplete = 30
} ncclProfilerEventState_t;

typedef ncclProfilerEventState_t ncclProfilerEventState_v1_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v2_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v3_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v4_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v5_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v6_t;

/* The net plugin's profiler callback (net ABI v10+, ncclProfilerCallback_t and its event types: net_common.h):
 * cb(&handle, type, phandle, pluginId, extData), pluginId = NCCL_PROFILER_NET_TYPE_* | the descriptor's version. */
#define NCCL_PROFILER_NET_VER_MASK (0xffff)
#define NCCL_PROFILER_NET_TYPE_MASK (0xffff0000)
#define NCCL_PROFILER_NET_TYPE_IB (1U << 16)
#define NCCL_PROFILER_NET_TYPE_SOCK (2U << 16)

/* What NCCL's built-in IB and socket transports pass as extData (NCCL_PROFILER_NET_TYPE_IB | 1, _SOCK | 1). */
enum { ncclProfileQp = (1 << 0) };
typedef struct {
  uint8_t type; /* ncclProfileQp */
  union {
    struct {
      int device;
      uint64_t wr_id;
      int opcode;
      int qpNum;
      size_t length;
    } qp;
  };
} ncclProfilerNetIbDescr_v1_t;
enum { ncclProfileSocket = (1 << 0) };
typedef struct {
  uint8_t type; /* ncclProfileSocket */
  union {
    struct {
      int fd;
      int op;
      size_t length;
    } sock;
  };
} ncclProfilerNetSockDescr_v1_t;

#ifdef __cplusplus
static_assert(sizeof(ncclProfilerEventState_t) == 4, "ncclProfilerEventState_t is a 4-byte enum");
static_assert(sizeof(ncclProfilerNetIbDescr_v1_t) == 40, "ncclProfilerNetIbDescr_v1_t layout");
static_assert(sizeof(ncclProfilerNetSockDescr_v1_t) == 24, "ncclProfilerNetSockDescr_v1_t layout");
#endif

#endif /* PLEXUS_PROFILER_COMMON_H_ */
