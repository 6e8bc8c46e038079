/*
 * Point-to-point: every send and receive of a launch on a channel progresses together, a step at a time, so that a
 * rank that sends to and receives from the same peers (AlltoAll, a ring of sendrecv) never waits on a message it has
 * not started to take in. Messages between a pair of ranks match in the order they were posted; a rank's sends to
 * itself are copied into its receives from itself. Host C++ and CUDA alike: thread 0 decides what moves, every
 * thread of the channel copies.
 *
 * A message of at least PLEXUS_P2P_ZERO_COPY_MIN_BYTES over a connection with a ptrExchange record goes zero-copy
 * when it can: the receiver says where to write (its buffer's address when the connection says the peer shares its
 * address space; on the host backend, whatever the transport offers through plexusP2pHostOps_v1_t: another
 * process's registered memory, process_vm_writev), the sender writes there once and publishes tail; otherwise, and
 * for smaller messages, the bytes cross through the connection's Simple slots. A message the planner marked LL
 * (work proto: at most NCCL_P2P_LL_THRESHOLD bytes) crosses as LL lines instead, a step of PLEXUS_LL_SLOT_LINES lines
 * at a time, where the connection has an LL buffer of its own that its transport describes (llSlots): data and flag
 * travel in the same stores, so the receiver waits for the lines alone, not for tail and then the slot (one cache
 * line crossing between cores, not two in turn). Both sides decide by the same rule.
 */
#ifndef PLEXUS_DEVICE_P2P_H_
#define PLEXUS_DEVICE_P2P_H_

#include "../device_v1.h"
#include "arch.h"
#include "kernel.h"
#include "primitives.h"
#include "primitives_ll.h"

namespace plexus::dev {

#define PLEXUS_P2P_ZERO_COPY_MIN_BYTES (64 * 1024)
/* Sends and receives one launch gives a channel at most (the planner cuts launches so). */
#define PLEXUS_P2P_MAX_WORKS 256
/* Copies one round of the loop makes at most (the other movable messages wait for the next round). */
#define PLEXUS_P2P_MAX_ACTIONS 32

PLEXUS_HD size_t p2pBytes(const plexusDevWork_v1_t* w) {
  const int t = w->datatype;
  const size_t elem = t == ncclInt8 || t == ncclUint8 || t == ncclFloat8e4m3 || t == ncclFloat8e5m2 ? 1
                      : t == ncclFloat16 || t == ncclBfloat16                                        ? 2
                      : t == ncclInt64 || t == ncclUint64 || t == ncclFloat64                        ? 8
                                                                                                     : 4;
  return (size_t)w->count * elem;
}

/* Copies n bytes; every thread takes its share. */
PLEXUS_HD void p2pCopy(int tid, int nthreads, char* dst, const char* src, size_t n) {
#if defined(__CUDA_ARCH__)
  if ((((uintptr_t)dst | (uintptr_t)src) & 15) == 0) {
    const size_t v = n / 16;
    for (size_t i = tid; i < v; i += nthreads) ((uint4*)dst)[i] = ((const uint4*)src)[i];
    for (size_t i = v * 16 + tid; i < n; i += nthreads) dst[i] = src[i];
  } else {
    for (size_t i = tid; i < n; i += nthreads) dst[i] = src[i];
  }
#else
  const size_t b = n * tid / nthreads, e = n * (tid + 1) / nthreads;
  if (e > b && dst != src) memcpy(dst + b, src + b, e - b);
#endif
}

enum P2pMode : uint8_t { kP2pSlots = 0, kP2pNegotiate = 1, kP2pDirect = 2, kP2pDone = 3, kP2pLL = 4, kP2pNet = 5 };

/* Whether messages may cross connector c as LL lines: it has an LL buffer of its own, described by its transport. */
PLEXUS_HD bool p2pTakesLL(const plexusConnInfo_v1_t* c) {
  return c->llSlots > 0 && !(c->flags & PLEXUS_CONN_LL_IN_SLOTS) && c->buffs[PLEXUS_PROTO_LL];
}
/* The lines a step of n bytes of an LL message takes: one at least, which says that an empty message arrived. */
PLEXUS_HD size_t p2pLLLines(uint64_t n) { return n ? (size_t)((n + 7) / 8) : 1; }

/* Everything one channel's point-to-point loop keeps (CUDA: in shared memory; host: on the thread's stack). */
struct P2pState {
  struct Msg {
    char* buf;
    uint64_t bytes, done;
    uint16_t next;  /* the queue's next message; 0xffff: none */
    uint16_t prev;  /* while building the queues */
    uint8_t mode;
    uint8_t isSend;
    uint8_t ll; /* the planner marked it LL */
    int peer;
  } msg[PLEXUS_P2P_MAX_WORKS];
  struct Queue {
    plexusConnInfo_v1_t* conn;
    uint64_t step;
    uint16_t cur; /* the message in progress; 0xffff: all done */
    int peer;
    uint8_t isSend;
  } queue[PLEXUS_P2P_MAX_WORKS];
  struct Action {
    char* dst;
    const char* src;
    uint64_t n;
    uint16_t queue; /* 0xffff: a copy to itself */
    uint32_t llFlag; /* LL step: the lines' flag (dst is the lines of a send, src those of a receive); 0: none */
  } act[PLEXUS_P2P_MAX_ACTIONS];
  int nMsg, nQueue, nAct;
  int pending;  /* messages not done */
  int status;   /* PLEXUS_CHANNEL_* the loop ends with */
  int selfSends, selfRecvs;
  int selfLeft, selfSend, selfRecv; /* copies to itself still to queue, and where the next pair is looked for */
};

/* Thread 0: the receiver's record for queue q's current message, and the mode both sides now take. */
PLEXUS_HD void p2pDescribe(const plexusDevKernelArgs_v1_t* a, int channel, P2pState* s, P2pState::Queue& q,
                           P2pState::Msg& m) {
  plexusPtrExchange_v1_t* x = q.conn->ptrExchange;
  plexusPtrExchange_v1_t d;
  d.kind = PLEXUS_XCHG_SLOTS;
  d.addr = d.pid = d.fd = d.offset = d.serial = 0;
  d.size = m.bytes;
  if (q.conn->flags & PLEXUS_CONN_P2P_SAME_SPACE) {
    d.kind = PLEXUS_XCHG_ADDRESS;
    d.addr = (uint64_t)(uintptr_t)m.buf;
  } else if (a->hostOps && a->hostOps->describe(a->hostOps->ctx, channel, q.peer, m.buf, m.bytes, &d) != ncclSuccess) {
    d.kind = PLEXUS_XCHG_SLOTS;
  }
  x->kind = d.kind;
  x->addr = d.addr;
  x->size = m.bytes;
  x->pid = d.pid;
  x->fd = d.fd;
  x->offset = d.offset;
  x->serial = d.serial;
  storeRelease(&x->seq, q.step + 1);
  m.mode = d.kind == PLEXUS_XCHG_SLOTS ? kP2pSlots : kP2pDirect;
}

/* What p2pStep did: nothing could move; the message moved on without a copy; a copy was queued (the queue then
 * waits for the next round, since its step advances only when the copy is posted). */
enum P2pMove { kP2pBlocked = 0, kP2pMoved = 1, kP2pQueued = 2 };

/* Thread 0: a step of a message that a proxy moves by pointer (PLEXUS_CONN_NET_PTR), straight from or into the
 * user's buffer. A sender hands each step to its proxy as it has credit, then waits until the proxy has sent them all
 * (head): only then is the buffer the application's again. A receiver says where each step it wants goes before it
 * wants it, and takes the step once the proxy has received it (tail). */
PLEXUS_HD P2pMove p2pNetStep(const plexusDevKernelArgs_v1_t* a, P2pState* s, P2pState::Queue& q, P2pState::Msg& m) {
  plexusConnInfo_v1_t* c = q.conn;
  const uint64_t stepSize = (uint64_t)c->stepSize;
  if (q.isSend) {
    if (m.done == m.bytes) {
      if (loadAcquire(c->head) < q.step) return kP2pBlocked;
      c->headCache = q.step;
      m.mode = kP2pDone;
      return kP2pMoved;
    }
    if (c->headCache + PLEXUS_STEPS < q.step + 1 && (c->headCache = loadAcquire(c->head)) + PLEXUS_STEPS < q.step + 1)
      return kP2pBlocked;
    const uint64_t n = m.bytes - m.done < stepSize ? m.bytes - m.done : stepSize;
    plexusConnFifo_v1_t& f = c->connFifo[q.step % PLEXUS_STEPS];
    f.ptr = m.buf + m.done;
    f.size = (int64_t)n;
    f.mode = PLEXUS_MODE_PTR;
    storeRelease(c->tail, ++q.step);
    m.done += n;
    return kP2pMoved;
  }
  const uint64_t left = (m.bytes - m.done + stepSize - 1) / stepSize;
  const uint64_t want = q.step + (left < PLEXUS_STEPS ? left : PLEXUS_STEPS);
  for (uint64_t t = loadRelaxed(c->recvWanted) > q.step ? loadRelaxed(c->recvWanted) : q.step; t < want; t++) {
    const uint64_t off = m.done + (t - q.step) * stepSize;
    plexusConnFifo_v1_t& f = c->connFifo[t % PLEXUS_STEPS];
    f.ptr = m.buf + off;
    f.size = (int64_t)(m.bytes - off < stepSize ? m.bytes - off : stepSize);
    f.mode = PLEXUS_MODE_PTR;
  }
  wantRecv(c, want);
  if (loadAcquire(c->tail) < q.step + 1) return kP2pBlocked;
  const uint64_t n = m.bytes - m.done < stepSize ? m.bytes - m.done : stepSize;
  plexusConnFifo_v1_t& f = c->connFifo[q.step % PLEXUS_STEPS];
  f.mode = PLEXUS_MODE_NORMAL;
  f.size = PLEXUS_CONNFIFO_FREE;
  storeRelease(c->head, ++q.step);
  if (a->hostOps) a->hostOps->count(a->hostOps->ctx, n, 0);
  m.done += n;
  if (m.done == m.bytes) m.mode = kP2pDone;
  return kP2pMoved;
}

/* Thread 0: moves queue qi's current message on if its connector allows it now (a copy is queued as an action,
 * posted after every thread has done it). */
PLEXUS_HD P2pMove p2pStep(const plexusDevKernelArgs_v1_t* a, int channel, P2pState* s, int qi) {
  P2pState::Queue& q = s->queue[qi];
  P2pState::Msg& m = s->msg[q.cur];
  plexusConnInfo_v1_t* c = q.conn;
  plexusPtrExchange_v1_t* x = c->ptrExchange;
  if (m.mode == kP2pNegotiate) {
    if (!q.isSend) {
      p2pDescribe(a, channel, s, q, m);
      return kP2pMoved;
    }
    if (loadAcquire(&x->seq) != q.step + 1) return kP2pBlocked;
    /* The receiver's size comes with every record, whatever the route: through the slots a larger receive would
     * otherwise take the rest of a step as data. */
    if (x->size != m.bytes) {
      s->status = PLEXUS_CHANNEL_ERROR;
      return kP2pBlocked;
    }
    const uint64_t kind = x->kind;
    if (kind == PLEXUS_XCHG_SLOTS) {
      m.mode = kP2pSlots;
      return kP2pMoved;
    }
    if (kind == PLEXUS_XCHG_ADDRESS) {
      if (s->nAct == PLEXUS_P2P_MAX_ACTIONS) return kP2pBlocked;
      s->act[s->nAct++] = P2pState::Action{(char*)(uintptr_t)x->addr, m.buf, m.bytes, (uint16_t)qi, 0};
      m.done = m.bytes;
      return kP2pQueued;
    }
    /* Another process's memory: only the host's transport reaches it. Refused: say so through the record, spend
     * the step on it, and go on through the slots. */
    const bool wrote = a->hostOps && a->hostOps->write(a->hostOps->ctx, channel, q.peer, x, m.buf, m.bytes) == ncclSuccess;
    if (!wrote) x->kind = PLEXUS_XCHG_SLOTS;
    storeRelease(c->tail, ++q.step);
    if (wrote) {
      m.done = m.bytes;
      m.mode = kP2pDone;
    } else {
      m.mode = kP2pSlots;
    }
    return kP2pMoved;
  }
  if (m.mode == kP2pDirect) { /* receive side: the sender's write is complete at tail */
    if (loadAcquire(c->tail) < q.step + 1) return kP2pBlocked;
    storeRelease(c->head, ++q.step);
    if (loadRelaxed(&x->kind) == PLEXUS_XCHG_SLOTS) { /* the sender could not write here */
      m.mode = kP2pSlots;
      return kP2pMoved;
    }
    if (a->hostOps) a->hostOps->count(a->hostOps->ctx, m.bytes, 0);
    m.done = m.bytes;
    m.mode = kP2pDone;
    return kP2pMoved;
  }
  if (m.mode == kP2pNet) return p2pNetStep(a, s, q, m);
  if (s->nAct == PLEXUS_P2P_MAX_ACTIONS) return kP2pBlocked;
  if (m.mode == kP2pLL) {
    const uint64_t per = (uint64_t)PLEXUS_LL_SLOT_LINES * 8;
    const uint64_t n = m.bytes - m.done < per ? m.bytes - m.done : per;
    volatile plexusLLFifoLine_v1_t* l = LLProtocol::lines(c, q.step);
    const uint32_t flag = (uint32_t)(q.step + 1);
    if (q.isSend) {
      const uint64_t slots = llSlotsOf(c);
      if (c->headCache + slots < q.step + 1 && (c->headCache = loadAcquire(c->head)) + slots < q.step + 1)
        return kP2pBlocked;
      s->act[s->nAct++] = P2pState::Action{(char*)l, m.buf + m.done, n, (uint16_t)qi, flag};
    } else {
      /* The sender writes its lines in order: once the last is here, so are the others (each is still checked). */
      uint64_t w0, w1;
      loadLLLine(l + p2pLLLines(n) - 1, &w0, &w1);
      if (!lineCarries(w0, w1, flag)) return kP2pBlocked;
      s->act[s->nAct++] = P2pState::Action{m.buf + m.done, (const char*)l, n, (uint16_t)qi, flag};
    }
    m.done += n;
    return kP2pQueued;
  }
  const uint64_t n = m.bytes - m.done < (uint64_t)c->stepSize ? m.bytes - m.done : (uint64_t)c->stepSize;
  char* slot = c->buffs[PLEXUS_PROTO_SIMPLE] + (size_t)(q.step % PLEXUS_STEPS) * (size_t)c->stepSize;
  if (q.isSend) {
    /* The peer's head is read only when the credit last seen runs out (PeerConns::waitSendCredit). */
    if (c->headCache + PLEXUS_STEPS < q.step + 1 && (c->headCache = loadAcquire(c->head)) + PLEXUS_STEPS < q.step + 1)
      return kP2pBlocked;
    s->act[s->nAct++] = P2pState::Action{slot, m.buf + m.done, n, (uint16_t)qi, 0};
  } else {
    /* The slices of the message still to come (a proxy posts receives for these alone). */
    const uint64_t left = (m.bytes - m.done + c->stepSize - 1) / c->stepSize;
    wantRecv(c, q.step + (left < PLEXUS_STEPS ? (left ? left : 1) : PLEXUS_STEPS));
    if (loadAcquire(c->tail) < q.step + 1) return kP2pBlocked;
    s->act[s->nAct++] = P2pState::Action{m.buf + m.done, slot, n, (uint16_t)qi, 0};
  }
  m.done += n;
  return kP2pQueued;
}

/* Thread 0, after every thread copied: publishes what the round's copies moved. */
PLEXUS_HD void p2pPost(const plexusDevKernelArgs_v1_t* a, P2pState* s) {
  for (int i = 0; i < s->nAct; i++) {
    const P2pState::Action& act = s->act[i];
    if (act.queue == 0xffff) continue;
    P2pState::Queue& q = s->queue[act.queue];
    P2pState::Msg& m = s->msg[q.cur];
    plexusConnInfo_v1_t* c = q.conn;
    if (m.mode == kP2pNegotiate) { /* a zero-copy write into the peer's buffer */
      storeRelease(c->tail, ++q.step);
      m.mode = kP2pDone;
      continue;
    }
    if (m.mode == kP2pLL) { /* LL lines: the sender's tail keeps the step count Simple shares */
      storeRelease(q.isSend ? c->tail : c->head, ++q.step);
      if (!q.isSend && a->hostOps) a->hostOps->count(a->hostOps->ctx, 0, act.n);
      if (m.done == m.bytes) m.mode = kP2pDone;
      continue;
    }
    if (q.isSend) {
      if (c->connFifo) c->connFifo[q.step % PLEXUS_STEPS].size = (int64_t)act.n;
      storeRelease(c->tail, ++q.step);
    } else {
      if (c->connFifo) c->connFifo[q.step % PLEXUS_STEPS].size = PLEXUS_CONNFIFO_FREE;
      storeRelease(c->head, ++q.step);
      if (a->hostOps) a->hostOps->count(a->hostOps->ctx, 0, act.n);
    }
    if (m.done == m.bytes) m.mode = kP2pDone;
  }
}

/* Builds the queues of the launch's sends and receives on channel (every thread takes part); false with
 * s->status set when they cannot be run (too many, a send to itself without its receive). */
PLEXUS_HD bool p2pSetup(const plexusDevKernelArgs_v1_t* a, int channel, int tid, int nthreads, P2pState* s) {
  plexusDevComm_v1_t* comm = a->comm;
  plexusDevChannel_v1_t* ch = &comm->channels[channel];
  if (tid == 0) {
    int n = 0;
    s->status = PLEXUS_CHANNEL_OK;
    for (uint32_t i = 0; i < a->nWorks; i++) {
      const plexusDevWork_v1_t* w = kernelWork(a, i);
      if (!workOnChannel(w, channel)) continue;
      if (n == PLEXUS_P2P_MAX_WORKS) {
        s->status = PLEXUS_CHANNEL_ERROR;
        break;
      }
      P2pState::Msg& m = s->msg[n++];
      m.isSend = w->func == ncclFuncSend;
      m.peer = w->peer;
      m.buf = (char*)(m.isSend ? w->sendbuff : w->recvbuff);
      m.bytes = p2pBytes(w);
      m.ll = w->proto == PLEXUS_PROTO_LL;
      m.done = 0;
      m.next = m.prev = 0xffff;
    }
    s->nMsg = n;
  }
  barrier();
  if (s->status != PLEXUS_CHANNEL_OK) return false;
  /* Each message finds the latest earlier one of its (peer, direction): its place in that queue. */
  for (int i = tid; i < s->nMsg; i += nthreads)
    for (int j = i - 1; j >= 0; j--)
      if (s->msg[j].peer == s->msg[i].peer && s->msg[j].isSend == s->msg[i].isSend) {
        s->msg[i].prev = (uint16_t)j;
        break;
      }
  barrier();
  if (tid == 0) {
    s->nQueue = 0;
    s->pending = 0;
    s->selfSends = s->selfRecvs = 0;
    for (int i = 0; i < s->nMsg; i++) {
      P2pState::Msg& m = s->msg[i];
      if (m.prev != 0xffff) s->msg[m.prev].next = (uint16_t)i;
      if (m.peer == comm->rank) {
        (m.isSend ? s->selfSends : s->selfRecvs)++;
        m.mode = kP2pDone; /* copied apart, below */
        continue;
      }
      s->pending++;
      plexusDevConnector_v1_t& conn = m.isSend ? ch->peers[m.peer].send : ch->peers[m.peer].recv;
      /* Both sides take the same path by the same rule: the planner's mark, the size and the connection. */
      const bool large = m.bytes >= PLEXUS_P2P_ZERO_COPY_MIN_BYTES;
      m.mode = m.ll && p2pTakesLL(&conn.conn)                          ? kP2pLL
               : large && (conn.conn.flags & PLEXUS_CONN_NET_PTR)   ? kP2pNet
               : large && conn.conn.ptrExchange                     ? kP2pNegotiate
                                                                    : kP2pSlots;
      if (m.prev != 0xffff) continue;
      if (!conn.connected) {
        s->status = PLEXUS_CHANNEL_ERROR;
        storeRelaxed(&ch->waitIsSend, m.isSend);
        storeRelaxed(&ch->waitPeer, m.peer);
        break;
      }
      P2pState::Queue& q = s->queue[s->nQueue++];
      q.conn = &conn.conn;
      q.step = conn.conn.step;
      q.cur = (uint16_t)i;
      q.peer = m.peer;
      q.isSend = m.isSend;
    }
    if (s->selfSends != s->selfRecvs) s->status = PLEXUS_CHANNEL_ERROR;
    s->selfLeft = s->selfSends;
    s->selfSend = s->selfRecv = 0;
  }
  barrier();
  return s->status == PLEXUS_CHANNEL_OK;
}

/* One step of an LL message: n bytes from src into its lines at l (8 bytes a line, the last one zero-padded), every
 * thread its share of the lines. */
PLEXUS_HD void p2pLLPack(int tid, int nthreads, volatile plexusLLFifoLine_v1_t* l, const char* src, uint64_t n,
                         uint32_t flag) {
  const size_t nlines = p2pLLLines(n), whole = (size_t)(n / 8);
#if !defined(__CUDA_ARCH__)
  LLProtocol::prefetchLines(l, nlines, true); /* the receiver's core holds them from the slot's last use */
#endif
  for (size_t j = (size_t)tid; j < nlines; j += (size_t)nthreads) {
    uint64_t w = 0;
#if defined(__CUDA_ARCH__)
    for (uint64_t b = 0; b < 8 && j * 8 + b < n; b++) w |= (uint64_t)(uint8_t)src[j * 8 + b] << (8 * b);
#else
    if (j < whole) memcpy(&w, src + j * 8, 8);
    else if (n > j * 8) memcpy(&w, src + j * 8, n - j * 8);
#endif
    storeLLLine(l + j, w, flag);
  }
  (void)whole;
}

/* The other way: one step's lines at l into dst, each line once its flags say so; false when a wait ended by abort
 * or timeout. */
PLEXUS_HD bool p2pLLUnpack(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch, int peer, int tid, int nthreads,
                           char* dst, volatile plexusLLFifoLine_v1_t* l, uint64_t n, uint32_t flag) {
  const size_t whole = (size_t)(n / 8);
  for (size_t j = (size_t)tid; j * 8 < n; j += (size_t)nthreads) {
    uint64_t w0, w1;
    loadLLLine(l + j, &w0, &w1);
    if (!lineCarries(w0, w1, flag) && !waitLine(comm, ch, l + j, flag, peer, &w0, &w1)) return false;
    const uint64_t w = (w0 & 0xffffffffull) | (w1 << 32);
#if defined(__CUDA_ARCH__)
    for (uint64_t b = 0; b < 8 && j * 8 + b < n; b++) dst[j * 8 + b] = (char)(uint8_t)(w >> (8 * b));
#else
    if (j < whole) memcpy(dst + j * 8, &w, 8);
    else memcpy(dst + j * 8, &w, n - j * 8);
#endif
  }
  (void)whole;
  return true;
}

/* The rank's own sends copied into its own receives, in order, as many as the round holds (sizes must match);
 * the cursors stay in s for the next round. */
PLEXUS_HD void p2pQueueSelfCopies(P2pState* s, int rank) {
  while (s->selfLeft > 0 && s->nAct < PLEXUS_P2P_MAX_ACTIONS) {
    while (!(s->msg[s->selfSend].peer == rank && s->msg[s->selfSend].isSend)) s->selfSend++;
    while (!(s->msg[s->selfRecv].peer == rank && !s->msg[s->selfRecv].isSend)) s->selfRecv++;
    const P2pState::Msg& snd = s->msg[s->selfSend++];
    const P2pState::Msg& rcv = s->msg[s->selfRecv++];
    if (rcv.bytes != snd.bytes) {
      s->status = PLEXUS_CHANNEL_ERROR;
      return;
    }
    if (rcv.buf != snd.buf) s->act[s->nAct++] = P2pState::Action{rcv.buf, snd.buf, snd.bytes, 0xffff, 0};
    s->selfLeft--;
  }
}

/* The step loop of a launch's sends and receives on one channel. */
PLEXUS_HD ncclResult_t runP2p(const plexusDevKernelArgs_v1_t* a, int channel, int tid, int nthreads, P2pState* s) {
  plexusDevComm_v1_t* comm = a->comm;
  plexusDevChannel_v1_t* ch = &comm->channels[channel];
  if (!p2pSetup(a, channel, tid, nthreads, s)) {
    if (tid == 0) storeRelaxed(&ch->status, s->status);
    return channelResult(ch);
  }
  /* The rank's own copies wait for the first round: by then its receives have told their senders where to write,
   * so the peers' copies into this rank overlap with these. */
  uint64_t waitStart = 0;
  for (uint32_t iter = 0, round = 0;; iter++, round++) {
    if (tid == 0) {
      s->nAct = 0;
      bool moved = false;
      /* Receives say where to write before any send of this rank writes: a write into another process
       * (process_vm_writev) runs inside the loop below, and a record posted only after it would hold the peer's
       * write into this rank back for that long (two ranks exchanging would write in turn, never at once). */
      for (int qi = 0; qi < s->nQueue; qi++) {
        P2pState::Queue& q = s->queue[qi];
        if (!q.isSend && q.cur != 0xffff && s->msg[q.cur].mode == kP2pNegotiate) {
          p2pDescribe(a, channel, s, q, s->msg[q.cur]);
          moved = true;
        }
      }
      for (int qi = 0; qi < s->nQueue && s->status == PLEXUS_CHANNEL_OK; qi++) {
        P2pState::Queue& q = s->queue[qi];
        /* A queue moves until its connector runs out of credit (sends) or data (receives), or it has a copy. */
        while (q.cur != 0xffff && s->msg[q.cur].mode != kP2pDone) {
          const P2pMove r = p2pStep(a, channel, s, qi);
          if (r == kP2pBlocked) break;
          moved = true;
          if (r == kP2pQueued) break;
        }
      }
      if ((round > 0 || s->nQueue == 0) && s->selfLeft > 0 && s->status == PLEXUS_CHANNEL_OK) {
        p2pQueueSelfCopies(s, comm->rank);
        moved = true;
      }
      if (moved) {
        iter = 0;
        if (waitStart) storeRelaxed(&ch->waitPeer, -1);
        waitStart = 0;
      } else if ((iter & 63) == 63) {
        if (loadRelaxed(comm->abortFlag)) {
          s->status = PLEXUS_CHANNEL_ABORTED;
        } else {
          const uint64_t now = clockNs();
          if (!waitStart) {
            waitStart = now;
            /* Say on whom it waits (watchdog, hang reports): the first message that cannot move. */
            for (int qi = 0; qi < s->nQueue; qi++)
              if (s->queue[qi].cur != 0xffff) {
                storeRelaxed(&ch->waitSince, now);
                storeRelaxed(&ch->waitIsSend, (int)s->queue[qi].isSend);
                storeRelaxed(&ch->waitPeer, s->queue[qi].peer);
                break;
              }
          } else if (comm->timeoutNs && now - waitStart > comm->timeoutNs) {
            s->status = PLEXUS_CHANNEL_TIMEOUT;
          }
        }
      }
    }
    barrier();
    for (int i = 0; i < s->nAct; i++) {
      const P2pState::Action& act = s->act[i];
      if (!act.llFlag) {
        p2pCopy(tid, nthreads, act.dst, act.src, act.n);
      } else if (s->queue[act.queue].isSend) {
        p2pLLPack(tid, nthreads, (volatile plexusLLFifoLine_v1_t*)act.dst, act.src, act.n, act.llFlag);
      } else if (!p2pLLUnpack(comm, ch, s->queue[act.queue].peer, tid, nthreads, act.dst,
                              (volatile plexusLLFifoLine_v1_t*)act.src, act.n, act.llFlag)) {
        s->status = loadRelaxed(&ch->status); /* a wait ended by abort or timeout, which the channel says */
      }
    }
    barrier();
    if (tid == 0) {
      p2pPost(a, s);
      /* Queues whose message is done move to their next one. */
      int left = 0;
      for (int qi = 0; qi < s->nQueue; qi++) {
        P2pState::Queue& q = s->queue[qi];
        while (q.cur != 0xffff && s->msg[q.cur].mode == kP2pDone) q.cur = s->msg[q.cur].next;
        left += q.cur != 0xffff;
      }
      s->pending = left + s->selfLeft;
      if (s->pending == 0 || s->status != PLEXUS_CHANNEL_OK) {
        for (int qi = 0; qi < s->nQueue; qi++) s->queue[qi].conn->step = s->queue[qi].step;
        if (s->status == PLEXUS_CHANNEL_OK && waitStart) storeRelaxed(&ch->waitPeer, -1);
        storeRelaxed(&ch->status, s->status);
      }
    }
    barrier();
    if (s->pending == 0 || s->status != PLEXUS_CHANNEL_OK) break;
    if (tid == 0 && s->nAct == 0) backoff(iter, comm->spinPolls);
  }
  return channelResult(ch);
}

}  // namespace plexus::dev

#endif /* PLEXUS_DEVICE_P2P_H_ */
