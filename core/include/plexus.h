/*
 * Plexus extensions to the NCCL API: host streams and events (the host backend's analog of CUDA
 * streams), per-thread host device selection, and introspection.
 *
 * A host stream is an in-order queue: collectives enqueued on it run asynchronously, in order, and
 * plexusStreamSynchronize waits for all of them. Its handle is a cudaStream_t, so it is passed to
 * ncclAllReduce and friends unchanged. A NULL stream is the default host stream of a host device:
 * in collectives the communicator's device, in plexusStream* calls the thread's current device.
 */
#ifndef PLEXUS_H_
#define PLEXUS_H_

#include "nccl.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PLEXUS_VERSION_MAJOR 0
#define PLEXUS_VERSION_MINOR 1
#define PLEXUS_VERSION_PATCH 0

typedef struct plexusEvent* plexusEvent_t;

/* Host streams. */
ncclResult_t plexusStreamCreate(cudaStream_t* stream);
ncclResult_t plexusStreamDestroy(cudaStream_t stream);
/* Waits until everything enqueued on the stream has run; returns the first error any of it hit. */
ncclResult_t plexusStreamSynchronize(cudaStream_t stream);
/* ncclSuccess when the stream is idle, ncclInProgress while work is pending. */
ncclResult_t plexusStreamQuery(cudaStream_t stream);
ncclResult_t plexusStreamWaitEvent(cudaStream_t stream, plexusEvent_t event);

/* Host events: mark a point in a stream; record times for plexusEventElapsedTime. */
ncclResult_t plexusEventCreate(plexusEvent_t* event);
ncclResult_t plexusEventDestroy(plexusEvent_t event);
ncclResult_t plexusEventRecord(plexusEvent_t event, cudaStream_t stream);
ncclResult_t plexusEventSynchronize(plexusEvent_t event);
ncclResult_t plexusEventQuery(plexusEvent_t event);
ncclResult_t plexusEventElapsedTime(float* ms, plexusEvent_t start, plexusEvent_t end);

/* The host analog of cudaSetDevice: the device a thread's communicators are created on. Host
 * devices are numbered 0..PLEXUS_MAX_HOST_DEVICES-1; they name ranks, not hardware. */
#define PLEXUS_MAX_HOST_DEVICES 4096
ncclResult_t plexusSetDevice(int device);
ncclResult_t plexusGetDevice(int* device);

/* Introspection. */
typedef enum { plexusBackendHost = 0, plexusBackendCuda = 1 } plexusBackend_t;
ncclResult_t plexusCommGetBackend(ncclComm_t comm, plexusBackend_t* backend);
/* Number of channels the communicator has set up. */
ncclResult_t plexusCommChannelCount(ncclComm_t comm, int* nChannels);
/* The algorithm/protocol/channel choice of the last collective enqueued on this communicator. */
typedef struct {
  const char* algorithm;
  const char* protocol;
  int nChannels;
  size_t chunkBytes;
  const char* reason; /* why: "rule N of FILE (line L)", the tuner plugin, or "cost model: ..." */
} plexusDecision_t;
ncclResult_t plexusCommLastDecision(ncclComm_t comm, plexusDecision_t* decision);
/* Counters since the communicator was created: operations launched, and point-to-point bytes that
 * were written straight into the receiver's buffer (zero-copy: ranks of one process, registered
 * ncclMemAlloc memory or process_vm_writev between processes, the net proxy across nodes) or went
 * through the connections' slots. */
typedef struct {
  uint64_t operations;
  uint64_t p2pZeroCopyBytes;
  uint64_t p2pSlotBytes;
} plexusCommStats_t;
ncclResult_t plexusCommGetStats(ncclComm_t comm, plexusCommStats_t* stats);
/* One-sided bytes this rank has put since the communicator was created, by the way they went: written straight into
 * the peer's window (ranks of one process; ncclMemAlloc windows between processes of one node); sent on the peer's
 * one-sided socket with their header (puts of at most PLEXUS_RMA_INLINE_BYTES it cannot write itself); through a
 * connector of the communicator's transports (larger ones: the net plugin between nodes). Any pointer may be NULL. */
ncclResult_t plexusCommGetRmaStats(ncclComm_t comm, uint64_t* directBytes, uint64_t* socketBytes,
                                   uint64_t* transportBytes);
/* How the communicator's operations were launched: kernel launches so far (one per plan: a run of operations one
 * kernel runs), where the last one's work items travelled (0: in the kernel's parameter, 1: in the workFifo ring,
 * 2: with a captured CUDA graph), how many it had, the workFifo's counters (entries written; entries the
 * device is done with), and how many launches repeated the one before them: where the previous launch was one
 * collective alone, a collective outside any group on the same stream with the same collective, datatype and count
 * is launched again with its own buffers, operator and root, without deciding and planning it again (host backend);
 * and how many launches ran in the same pass as the launch queued before them on their stream (host backend: sends
 * and receives that touch no memory the other's receives write, PLEXUS_P2P_JOIN). */
typedef struct {
  uint64_t launches;
  int lastStorage;
  int lastWorks;
  uint32_t fifoProduced;
  uint32_t fifoConsumed;
  uint64_t repeats;
  uint64_t joined;
} plexusLaunchInfo_t;
ncclResult_t plexusCommGetLaunchInfo(ncclComm_t comm, plexusLaunchInfo_t* info);

/* Fault handling. A wait of an operation that lasts longer than the timeout fails it with ncclTimeout
 * and prints a hang report on every rank that times out; 0 waits forever. The default comes from
 * PLEXUS_TIMEOUT / NCCL_TIMEOUT (seconds, default 0); this sets it for one communicator. */
ncclResult_t plexusCommSetTimeout(ncclComm_t comm, double seconds);
/* The hang report of a communicator (what each channel runs and on which rank it waits), as printed on
 * a timeout and on SIGUSR1, NUL-terminated and cut to size bytes. */
ncclResult_t plexusCommHangReport(ncclComm_t comm, char* report, size_t size);
/* After a failure: a rank known to be gone (its process died), so that the survivors can
 * ncclCommShrink it away; -1 when the failure names none (a timeout, a broken connection). */
ncclResult_t plexusCommFailedRank(ncclComm_t comm, int* rank);

#ifdef __cplusplus
}
#endif

#endif /* PLEXUS_H_ */
