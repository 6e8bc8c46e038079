/*
 * Plexus device ABI, version 1: what kernels see. The core fills these structs; algorithm plugins'
 * step loops read them through the primitives in plexus/device/primitives.h; transport plugins fill
 * the connector of each connection. The layout follows NCCL's ncclConnInfo / ncclConnFifo so that
 * the proxy-driven net path works exactly as NCCL's (see nccl-abi.md §5).
 *
 * C99. Every struct that crosses a plugin boundary is pinned with static_asserts (C++ builds).
 */
#ifndef PLEXUS_DEVICE_V1_H_
#define PLEXUS_DEVICE_V1_H_

#include <stddef.h>
#include <stdint.h>

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PLEXUS_DEVICE_ABI_VERSION 1

#define PLEXUS_STEPS 8           /* slots per connection, NCCL_STEPS */
#define PLEXUS_MAXCHANNELS 32
#define PLEXUS_MAX_TREE_ARITY 3

/* Protocol indices are NCCL's (tuner tables use them). */
#define PLEXUS_PROTO_LL 0
#define PLEXUS_PROTO_LL128 1
#define PLEXUS_PROTO_SIMPLE 2
#define PLEXUS_NUM_PROTOCOLS 3

/* LL protocol: 16-byte lines of two (4-byte data, 4-byte flag) words, flag = step + 1 (NCCL's
 * ncclLLFifoLine); PLEXUS_LL_SLOT_LINES lines per step, so 2 KiB of payload per step. */
#define PLEXUS_LL_SLOT_LINES 256
#define PLEXUS_LL_SLOT_BYTES (PLEXUS_LL_SLOT_LINES * 16)
#define PLEXUS_LL_BUFF_BYTES (PLEXUS_STEPS * PLEXUS_LL_SLOT_BYTES)
/* LL slots the core asks for by default between ranks that both run the host backend (buffSizes[PLEXUS_PROTO_LL] is
 * this many slots there, PLEXUS_LL_BUFF_BYTES elsewhere), where the transport reports them in llSlots; more where the
 * node's ranks outnumber its cores, or as NCCL_LL_BUFFSIZE says. A rank that runs ahead, a Broadcast's root, does this
 * many small operations before it waits for its receiver (4 ranks on 2 cores, 8 B Broadcast: 8 slots 2.6 us, 64
 * slots 0.9 us). */
#define PLEXUS_LL_HOST_SLOTS 64

typedef union plexusLLFifoLine_v1 {
  struct {
    uint32_t data1;
    uint32_t flag1;
    uint32_t data2;
    uint32_t flag2;
  } s;
  uint64_t v[2];
} plexusLLFifoLine_v1_t;

/* LL128 protocol (NCCL's): 128-byte lines of 16 uint64 words; words 0..14 carry 120 bytes of data and
 * word 15 (PLEXUS_LL128_FLAG_WORD) the flag, step + 1 as a uint64, written only once the line's data is
 * visible. A step is PLEXUS_LL128_STEP_LINES(stepSize) lines: PLEXUS_LL128_SLOT_LINES, or fewer where the
 * Simple step is smaller (so that lines carried in Simple slots fit), the same on every connector of a
 * communicator since stepSize is. Slot s of the LL128 buffer starts at s * PLEXUS_LL128_SLOT_LINES lines. */
#define PLEXUS_LL128_LINE_BYTES 128
#define PLEXUS_LL128_LINE_WORDS 16
#define PLEXUS_LL128_DATA_WORDS 15
#define PLEXUS_LL128_FLAG_WORD 15
#define PLEXUS_LL128_DATA_BYTES (PLEXUS_LL128_DATA_WORDS * 8)
#define PLEXUS_LL128_SLOT_LINES 512
#define PLEXUS_LL128_BUFF_BYTES (PLEXUS_STEPS * PLEXUS_LL128_SLOT_LINES * PLEXUS_LL128_LINE_BYTES)
#define PLEXUS_LL128_STEP_LINES(stepSize)                                                              \
  ((size_t)(stepSize) / PLEXUS_LL128_LINE_BYTES < (size_t)PLEXUS_LL128_SLOT_LINES                  \
       ? (size_t)(stepSize) / PLEXUS_LL128_LINE_BYTES                                               \
       : (size_t)PLEXUS_LL128_SLOT_LINES)

/* connFifo modes and the "slot free" size, as NCCL's. */
#define PLEXUS_MODE_NORMAL 0
#define PLEXUS_MODE_OFFSET 1
#define PLEXUS_MODE_PTR 2
#define PLEXUS_CONNFIFO_FREE (-1)

typedef struct plexusConnFifo_v1 {
  int mode;
  int offset;
  int64_t size; /* bytes in the slot; -1 when the slot is free */
  void* ptr;
} plexusConnFifo_v1_t;

/* Zero-copy point-to-point (NCCL's ptrExchange): for a large message the receiver tells the sender
 * where to write it, in this record, which lives in the sender's connection memory. The receiver
 * writes the fields, then seq; the sender reads seq, then the fields. */
#define PLEXUS_XCHG_SLOTS 0   /* use the connection's slots as usual */
#define PLEXUS_XCHG_ADDRESS 1 /* addr is the destination in the sender's address space (same process) */
#define PLEXUS_XCHG_MEMFD 2   /* the destination is offset bytes into the receiver's memfd (pid, fd) */
/* The destination is addr in process pid, written by the sender with process_vm_writev (one copy, as
 * MPI's CMA path). A sender that cannot (ptrace rules) sets kind to PLEXUS_XCHG_SLOTS and publishes
 * tail for the step with no data: the message then goes through the slots from the next step on. */
#define PLEXUS_XCHG_CMA 3

typedef struct plexusPtrExchange_v1 {
  volatile uint64_t seq; /* the connection step the record is for, plus one; 0: none yet */
  uint64_t kind;         /* PLEXUS_XCHG_* */
  uint64_t addr;
  uint64_t size;   /* bytes the receiver takes */
  uint64_t pid;    /* MEMFD: the receiver's process, */
  uint64_t fd;     /* its file descriptor of the memory, */
  uint64_t offset; /* the destination's offset in it, */
  uint64_t serial; /* and the allocation's serial number in that process (fds are reused) */
} plexusPtrExchange_v1_t;

/* plexusConnInfo_v1_t.flags. LL_IN_SLOTS: the connection's LL and LL128 lines travel in its Simple
 * slots, whole slots at a time (a proxy moves them over a network): step s's lines are at
 * buffs[PLEXUS_PROTO_SIMPLE] + (s % PLEXUS_STEPS) * stepSize, the sender records their bytes in
 * connFifo and publishes tail, and a receiver reads them once *tail > s. */
#define PLEXUS_CONN_LL_IN_SLOTS 0x1
/* The peer shares this connection's address space (ranks of one process; on CUDA, of one device or with peer
 * access): a point-to-point receiver may hand its sender a plain address (PLEXUS_XCHG_ADDRESS). */
#define PLEXUS_CONN_P2P_SAME_SPACE 0x2
/* A proxy moves this connection's steps and takes a step by pointer (connFifo mode PLEXUS_MODE_PTR, as NCCL's
 * NCCL_MODE_PTR): a sender's step whose entry has that mode goes out from ptr (size bytes) instead of its slot; a
 * receiver's step whose entry has that mode, written before recvWanted covers the step, is received into ptr (size
 * bytes) instead of its slot. The memory is the proxy's until the step completes (the sender's head, the receiver's
 * tail passes it). The entry goes back to PLEXUS_MODE_NORMAL when its slot is free again: by the sender's proxy when
 * the send completes, by the receiver's kernel when it consumes the step. Point-to-point messages of at least
 * PLEXUS_P2P_ZERO_COPY_MIN_BYTES go so, and the Simple protocol's calls of at least PLEXUS_NET_PTR_MIN_BYTES whose
 * data the application's buffers hold (primitives.h, netPtrRoute), with no copy through the slots; either side may,
 * whatever the other does. */
#define PLEXUS_CONN_NET_PTR 0x4

/* One direction of one connection, as its kernel sees it. For a send connector buffs/tail/connFifo
 * are the receiver's and head is local; for a recv connector the reverse. */
typedef struct plexusConnInfo_v1 {
  char* buffs[PLEXUS_NUM_PROTOCOLS];
  void* mhandles[PLEXUS_NUM_PROTOCOLS];
  volatile uint64_t* tail;
  volatile uint64_t* head;
  int flags;
  int shared;
  int stepSize; /* Simple: buffer bytes / PLEXUS_STEPS */
  /* Slots of PLEXUS_LL_SLOT_BYTES in buffs[PLEXUS_PROTO_LL], step s's lines in slot s % llSlots: a power of two, at
   * least PLEXUS_STEPS and within the buffer, which the transport sets from the LL buffer's size. 0 (transports
   * that do not say): PLEXUS_STEPS. LL steps take credit for llSlots steps ahead; Simple and LL128 steps for
   * PLEXUS_STEPS. Unused where lines travel in Simple slots (PLEXUS_CONN_LL_IN_SLOTS). */
  int llSlots;
  plexusPtrExchange_v1_t* ptrExchange; /* NULL: the transport offers no zero-copy path */
  uint64_t* redOpArgExchange;
  plexusConnFifo_v1_t* connFifo;
  uint64_t step;      /* steps completed on this connection; kept across operations */
  uint64_t headCache; /* send side: the last *head seen, so credit is read from the peer only when it runs out */
  /* Receive side of a proxy-driven connection (NULL elsewhere): the kernel raises it to the number of
   * steps it is about to consume, and the proxy posts receives for those steps alone, never for data
   * that will not come (a receive left posted would fail when the peer closes). */
  volatile uint64_t* recvWanted;
} plexusConnInfo_v1_t;

typedef struct plexusDevConnector_v1 {
  int connected;
  int transport; /* index of the transport that set it up, for diagnostics */
  plexusConnInfo_v1_t conn;
} plexusDevConnector_v1_t;

typedef struct plexusDevChannelPeer_v1 {
  plexusDevConnector_v1_t send;
  plexusDevConnector_v1_t recv;
} plexusDevChannelPeer_v1_t;

typedef struct plexusDevRing_v1 {
  int prev;
  int next;
  int index;      /* this rank's position in the ring */
  int pad0;
  int* userRanks; /* ring order: userRanks[i] is the rank at position i */
} plexusDevRing_v1_t;

typedef struct plexusDevTree_v1 {
  int depth;
  int up;                          /* -1 at the root */
  int down[PLEXUS_MAX_TREE_ARITY]; /* -1 where absent */
  int pad0;
  /* [nRanks]: every rank's up in this channel's tree (-1 at its root), so that a step loop can
   * re-root the tree at an operation's root (Broadcast, Reduce) over the same connections. */
  const int* parents;
} plexusDevTree_v1_t;

/* Channel status, written by the kernel when it stops early. */
#define PLEXUS_CHANNEL_OK 0
#define PLEXUS_CHANNEL_ABORTED 1
#define PLEXUS_CHANNEL_TIMEOUT 2
#define PLEXUS_CHANNEL_ERROR 3 /* the operation is wrong (a send and its receive disagree on the size) */

typedef struct plexusDevChannel_v1 {
  plexusDevRing_v1_t ring;
  plexusDevTree_v1_t tree;
  plexusDevChannelPeer_v1_t* peers; /* indexed by rank */
  int id;
  volatile int status;
  uint64_t waitSince; /* diagnostics: when the current wait started (ns), 0 when not waiting */
  int waitPeer;       /* diagnostics: rank the channel waits on, -1 when not waiting */
  int waitIsSend;
} plexusDevChannel_v1_t;

typedef struct plexusDevComm_v1 {
  uint32_t version; /* PLEXUS_DEVICE_ABI_VERSION */
  int rank;
  int nRanks;
  int nChannels;
  volatile uint32_t* abortFlag; /* nonzero: every wait gives up */
  uint64_t timeoutNs;           /* 0: wait forever */
  plexusDevChannel_v1_t* channels;
  uint32_t spinPolls;           /* host: polls spent spinning before a wait yields its core */
  uint32_t pad0;
} plexusDevComm_v1_t;

/* Reduction as kernels apply it; ncclAvg becomes PreMulSum (floats) or SumPostDiv (integers). */
typedef enum {
  plexusDevSum = 0,
  plexusDevProd = 1,
  plexusDevMax = 2,
  plexusDevMin = 3,
  plexusDevPreMulSum = 4,
  plexusDevSumPostDiv = 5,
  plexusDevNumRedOps = 6
} plexusDevRedOp_t;

/* redOpArg is the address of the scalar (ncclScalarDevice), read when the kernel runs. */
#define PLEXUS_WORK_REDOP_ARG_PTR 0x1

/* One collective's share of work for a range of channels. 64 bytes, written by the planner into the
 * workFifo and read by every channel in [channelLo, channelLo + nChannels). */
typedef struct plexusDevWork_v1 {
  uint8_t func;     /* ncclFunc_t */
  uint8_t datatype; /* ncclDataType_t */
  uint8_t redop;    /* plexusDevRedOp_t */
  uint8_t proto;    /* PLEXUS_PROTO_* */
  uint8_t channelLo;
  uint8_t nChannels;
  uint8_t algorithm; /* index of the algorithm plugin in the communicator */
  uint8_t flags;     /* PLEXUS_WORK_* */
  int32_t root;
  int32_t peer;      /* send/recv */
  uint64_t redOpArg; /* PreMulSum scalar bits or SumPostDiv divisor */
  const void* sendbuff;
  void* recvbuff;
  uint64_t count;      /* elements of the whole collective (per rank, NCCL's meaning for the func) */
  uint64_t chunkCount; /* elements per pipeline chunk */
  uint64_t opSeq;      /* collective sequence number on this communicator, for reports */
} plexusDevWork_v1_t;

/* Where a launch's work items live (NCCL's ncclDevWorkStorageType). */
#define PLEXUS_WORK_STORAGE_ARGS 0       /* inline in the kernel's parameter (inlineWorks), when they fit */
#define PLEXUS_WORK_STORAGE_FIFO 1       /* in the communicator's workFifo ring: works[(first + i) & mask] */
#define PLEXUS_WORK_STORAGE_PERSISTENT 2 /* in memory owned by a captured CUDA graph: works[i] */

/* The host backend's zero-copy point-to-point beyond one address space (another process's memory: its registered
 * ncclMemAlloc memory, or process_vm_writev), which its transport offers (transport_v1's p2pDescribe/p2pWrite) and
 * kernels reach through the core. NULL on CUDA. */
typedef struct plexusP2pHostOps_v1 {
  void* ctx;
  /* Receiver: where the sender on `channel` from `peer` should write bytes for buff (*x; kind SLOTS: nowhere). */
  ncclResult_t (*describe)(void* ctx, int channel, int peer, void* buff, size_t bytes, plexusPtrExchange_v1_t* x);
  /* Sender: writes bytes from src where the receiver's record x says; an error: not possible (the message then
   * goes through the slots, and the transport stops offering it). */
  ncclResult_t (*write)(void* ctx, int channel, int peer, const plexusPtrExchange_v1_t* x, const void* src,
                        size_t bytes);
  /* Bytes received zero-copy and through slots, for the communicator's counters. */
  void (*count)(void* ctx, uint64_t zeroCopyBytes, uint64_t slotBytes);
} plexusP2pHostOps_v1_t;

/* A kernel's one parameter: CUDA kernels take it by value (at most PLEXUS_KERNEL_ARGS_BYTES, cut after the last
 * inline work), the host backend passes its address. Block b runs the channel of the b-th set bit of
 * channelMask, and on it every work i < nWorks whose channel range holds that channel, in order. */
#define PLEXUS_KERNEL_ARGS_BYTES 4096
#define PLEXUS_KERNEL_ARGS_MAX_WORKS 63

typedef struct plexusDevKernelArgs_v1 {
  plexusDevComm_v1_t* comm;
  const plexusDevWork_v1_t* works; /* FIFO: the ring; PERSISTENT: the works; ARGS: NULL */
  uint32_t storage;                /* PLEXUS_WORK_STORAGE_* */
  uint32_t nWorks;
  uint32_t first; /* FIFO: ring index of the first work */
  uint32_t mask;  /* FIFO: ring entries - 1 */
  uint64_t channelMask;
  uint64_t launchSeq; /* the communicator's launch count, for reports */
  const plexusP2pHostOps_v1_t* hostOps; /* host backend only */
  uint64_t pad0;
  plexusDevWork_v1_t inlineWorks[PLEXUS_KERNEL_ARGS_MAX_WORKS];
} plexusDevKernelArgs_v1_t;

#ifdef __cplusplus
} /* extern "C" */
static_assert(sizeof(plexusLLFifoLine_v1_t) == 16, "plexusLLFifoLine_v1_t layout");
static_assert(PLEXUS_LL128_LINE_WORDS * 8 == PLEXUS_LL128_LINE_BYTES && PLEXUS_LL128_DATA_BYTES == 120,
              "LL128 line layout");
static_assert(sizeof(plexusConnFifo_v1_t) == 24, "plexusConnFifo_v1_t layout");
static_assert(sizeof(plexusPtrExchange_v1_t) == 64, "plexusPtrExchange_v1_t layout");
static_assert(offsetof(plexusConnInfo_v1_t, tail) == 48, "plexusConnInfo_v1_t layout");
static_assert(offsetof(plexusConnInfo_v1_t, llSlots) == 76, "plexusConnInfo_v1_t layout");
static_assert(offsetof(plexusConnInfo_v1_t, connFifo) == 96, "plexusConnInfo_v1_t layout");
static_assert(sizeof(plexusConnInfo_v1_t) == 128, "plexusConnInfo_v1_t layout");
static_assert(sizeof(plexusDevConnector_v1_t) == 136, "plexusDevConnector_v1_t layout");
static_assert(sizeof(plexusDevRing_v1_t) == 24, "plexusDevRing_v1_t layout");
static_assert(sizeof(plexusDevTree_v1_t) == 32, "plexusDevTree_v1_t layout");
static_assert(sizeof(plexusDevChannel_v1_t) == 88, "plexusDevChannel_v1_t layout");
static_assert(sizeof(plexusDevComm_v1_t) == 48, "plexusDevComm_v1_t layout");
static_assert(sizeof(plexusDevWork_v1_t) == 64, "plexusDevWork_v1_t layout");
static_assert(offsetof(plexusDevKernelArgs_v1_t, inlineWorks) == 64, "plexusDevKernelArgs_v1_t layout");
static_assert(sizeof(plexusDevKernelArgs_v1_t) == PLEXUS_KERNEL_ARGS_BYTES, "plexusDevKernelArgs_v1_t layout");
#endif

#endif /* PLEXUS_DEVICE_V1_H_ */
