// A transport plugin with one defect, for plexus-plugin-check's transport rules to catch (BAD_wrong_data: the
// receiver reads slots the sender never writes; BAD_no_credit: the sender's head is never raised, so a sender that
// filled every slot waits for ever; BAD_zero_copy_overrun: its zero-copy write lands one byte past the message;
// BAD_lines_apart: the receiver's LL and LL128 buffers are not the ones the sender writes; BAD_ll_slots: it reports
// twice the LL slots its buffer holds).
// Otherwise plain memory between ranks of one process.
#include <plexus/transport_v1.h>

#include <cstring>
#include <initializer_list>
#include <new>

namespace {

struct Shared {
  volatile uint64_t tail = 0, head = 0, wanted = 0, frozenHead = 0;
  plexusConnFifo_v1_t fifo[PLEXUS_STEPS];
  int stepSize = 0;
  int llBytes = 0;
  char* slots = nullptr;
  char* elsewhere = nullptr;  // BAD_wrong_data: what the receiver reads
  char* lines[2] = {};        // LL, LL128
  char* linesApart[2] = {};   // BAD_lines_apart: what the receiver reads
  int refs = 2;
};

ncclResult_t init(void** ctx, ncclDebugLogger_t) {
  *ctx = nullptr;
  return ncclSuccess;
}
ncclResult_t canConnect(void*, const plexusPeerInfo_v1_t* a, const plexusPeerInfo_v1_t* b, int* ret) {
  *ret = a->pidHash == b->pidHash;
  return ncclSuccess;
}
ncclResult_t recvSetup(void*, const plexusTransportSetup_v1_t* s, plexusConnectInfo_v1_t* info, void** res) {
  auto* sh = new Shared();
  sh->stepSize = s->buffSizes[PLEXUS_PROTO_SIMPLE] / PLEXUS_STEPS;
  sh->llBytes = s->buffSizes[PLEXUS_PROTO_LL];
  sh->slots = new char[(size_t)sh->stepSize * PLEXUS_STEPS]();
  sh->elsewhere = new char[(size_t)sh->stepSize * PLEXUS_STEPS]();
  for (int p : {PLEXUS_PROTO_LL, PLEXUS_PROTO_LL128}) {
    sh->lines[p] = new char[(size_t)s->buffSizes[p]]();
    sh->linesApart[p] = new char[(size_t)s->buffSizes[p]]();
  }
  memcpy(info->data, &sh, sizeof sh);
  *res = sh;
  return ncclSuccess;
}
void fill(Shared* sh, plexusConnInfo_v1_t* c, bool send) {
  memset(c, 0, sizeof *c);
  c->buffs[PLEXUS_PROTO_SIMPLE] = sh->slots;
#ifdef BAD_wrong_data
  if (!send) c->buffs[PLEXUS_PROTO_SIMPLE] = sh->elsewhere;
#endif
  for (int p : {PLEXUS_PROTO_LL, PLEXUS_PROTO_LL128}) c->buffs[p] = sh->lines[p];
#ifdef BAD_lines_apart
  if (!send)
    for (int p : {PLEXUS_PROTO_LL, PLEXUS_PROTO_LL128}) c->buffs[p] = sh->linesApart[p];
#endif
  c->tail = &sh->tail;
  c->head = &sh->head;
#ifdef BAD_no_credit
  if (send) c->head = &sh->frozenHead;
#endif
  c->connFifo = sh->fifo;
  c->stepSize = sh->stepSize;
#ifdef BAD_ll_slots
  c->llSlots = 2 * (sh->llBytes / PLEXUS_LL_SLOT_BYTES);
#endif
}
void release(Shared* sh) {
  if (--sh->refs) return;
  delete[] sh->slots;
  delete[] sh->elsewhere;
  for (int p : {PLEXUS_PROTO_LL, PLEXUS_PROTO_LL128}) {
    delete[] sh->lines[p];
    delete[] sh->linesApart[p];
  }
  delete sh;
}
ncclResult_t recvConnect(void* res, const plexusConnectInfo_v1_t*, plexusConnInfo_v1_t* conn) {
  fill((Shared*)res, conn, false);
  return ncclSuccess;
}
ncclResult_t recvFree(void* res) {
  release((Shared*)res);
  return ncclSuccess;
}
ncclResult_t finalize(void*) { return ncclSuccess; }

// The send side keeps a pointer to the receiver's state, learned at connect.
struct SendSide {
  Shared* sh = nullptr;
};
ncclResult_t sendSetup(void*, const plexusTransportSetup_v1_t*, plexusConnectInfo_v1_t* info, void** res) {
  memset(info, 0, sizeof *info);
  *res = new SendSide();
  return ncclSuccess;
}
ncclResult_t sendConnect(void* res, const plexusConnectInfo_v1_t* peer, plexusConnInfo_v1_t* conn) {
  auto* s = (SendSide*)res;
  memcpy(&s->sh, peer->data, sizeof s->sh);
  fill(s->sh, conn, true);
  return ncclSuccess;
}
ncclResult_t sendFree(void* res) {
  auto* s = (SendSide*)res;
  if (s->sh) release(s->sh);
  delete s;
  return ncclSuccess;
}

#ifdef BAD_zero_copy_overrun
// The destination's address as is (one address space); the write copies one byte too many.
ncclResult_t p2pDescribe(void*, void* buff, size_t bytes, const plexusShareable_v1_t*, plexusPtrExchange_v1_t* x) {
  x->kind = PLEXUS_XCHG_ADDRESS;
  x->addr = (uint64_t)(uintptr_t)buff;
  x->size = bytes;
  return ncclSuccess;
}
ncclResult_t p2pWrite(void*, const plexusPtrExchange_v1_t* x, const void* src, size_t bytes) {
  memcpy((void*)(uintptr_t)x->addr, src, bytes);
  ((char*)(uintptr_t)x->addr)[bytes] = 0x5a;
  return ncclSuccess;
}
#define ZERO_COPY p2pDescribe, p2pWrite
#else
#define ZERO_COPY nullptr, nullptr
#endif

}  // namespace

extern "C" __attribute__((visibility("default"))) const plexusTransport_v1_t plexusTransportPlugin_v1 = {
    PLEXUS_TRANSPORT_ABI_VERSION, sizeof(plexusTransport_v1_t), "bad-transport", init, canConnect, sendSetup,
    recvSetup, sendConnect, recvConnect, nullptr, sendFree, recvFree, nullptr, finalize, nullptr, nullptr, ZERO_COPY};
