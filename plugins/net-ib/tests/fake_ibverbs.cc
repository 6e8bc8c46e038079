// A stand-in for rdma-core's libibverbs.so.1 (as tests/unit_cuda's fake libcuda stands in for the CUDA driver), so
// that net-ib's verbs half — device discovery, queue pair states, the handshake, registration, the data path and its
// failures — runs on machines without an HCA, across real processes. It is not a network: it is one RoCE HCA,
// "fake_0", port 1, per machine, and a queue pair's RDMA WRITE/READ copies straight into or out of the peer
// process's memory with process_vm_writev/readv (the single-copy path of MPI's CMA), synchronously at post time.
//
// What it enforces, as an HCA would: RESET -> INIT -> RTR -> RTS with the attribute masks verbs requires (RoCE needs a
// global route header), posting sends only in RTS and receives from INIT on, local and remote keys covering every
// access (an unknown key or range completes with IBV_WC_REM_ACCESS_ERR), a WRITE with immediate consuming one posted
// receive at the target (none: IBV_WC_RNR_RETRY_EXC_ERR), a peer process that is gone completing with
// IBV_WC_RETRY_EXC_ERR, a queue pair in error flushing what follows, error completions whether signaled or not, and
// ibv_destroy_qp returning only once no peer's write into the queue pair's process is under way (none lands after).
// State that the peer process needs (its queue pairs, completion queues and memory keys) lives in /dev/shm files
// named by owner pid, swept when their owner is dead.
//
// Test hooks: PLEXUS_FAKE_IBV_LINK_LAYER=ib makes the port InfiniBand (default Ethernet, i.e. RoCE);
// PLEXUS_FAKE_IBV_PORT_ERR_AFTER=<n> raises IBV_EVENT_PORT_ERR on port 1 after the process's n-th post_send.
#include <dirent.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <string>

namespace {

constexpr int kCqCapacity = 65536;
constexpr int kMaxKeys = 4096;

// ---- shared memory -------------------------------------------------------------------------------------------------

void* mapShared(const std::string& name, size_t size, bool create) {
  const int fd = shm_open(name.c_str(), create ? O_RDWR | O_CREAT | O_EXCL : O_RDWR, 0600);
  if (fd < 0) return nullptr;
  if (create && ftruncate(fd, (off_t)size) != 0) {
    close(fd);
    shm_unlink(name.c_str());
    return nullptr;
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  return p == MAP_FAILED ? nullptr : p;
}

struct KeyTable {  // one per process: the memory regions its keys cover
  struct Entry {
    std::atomic<uint32_t> key;
    uint64_t addr, length;
  } e[kMaxKeys];
};

struct CqRing {  // many producers (this process's sends, peers' writes with immediate), one consumer
  std::atomic<uint64_t> head, tail;
  struct Slot {
    std::atomic<uint64_t> seq;  // index + 1 once written
    ibv_wc wc;
  } slot[kCqCapacity];
};

struct QpRecord {  // what a peer needs of a queue pair
  int pid;
  char cq[64];  // the shm name of its receive completion queue
  std::atomic<int> recvsPosted;
  std::atomic<int> state;     // kDestroyed once its owner destroyed it
  std::atomic<int> incoming;  // peers' operations reading or writing its process's memory right now
};
constexpr int kDestroyed = -1;

// An operation on a peer's queue pair, counted while it touches the peer's memory: the peer's ibv_destroy_qp
// waits for it, as an HCA's destroy returns only once no DMA for the queue pair is in flight.
class Incoming {
 public:
  explicit Incoming(QpRecord* peer) : peer_(peer) { peer_->incoming.fetch_add(1); }
  ~Incoming() { peer_->incoming.fetch_sub(1); }
  Incoming(const Incoming&) = delete;
  Incoming& operator=(const Incoming&) = delete;

 private:
  QpRecord* peer_;
};

// Files of processes that died without cleaning up: "plexus-fakeibv-<pid>-...".
void sweepDead() {
  DIR* d = opendir("/dev/shm");
  if (!d) return;
  while (dirent* e = readdir(d)) {
    int pid = 0, qpn = 0;
    if (sscanf(e->d_name, "plexus-fakeibv-qp-%d", &qpn) == 1) {  // a queue pair's link by number: its record's pid
      if (auto* r = static_cast<QpRecord*>(mapShared("/" + std::string(e->d_name), sizeof(QpRecord), false))) {
        pid = r->pid;
        munmap(r, sizeof(QpRecord));
      }
    } else if (sscanf(e->d_name, "plexus-fakeibv-%d-", &pid) != 1) {
      continue;
    }
    if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) shm_unlink(("/" + std::string(e->d_name)).c_str());
  }
  closedir(d);
}

// ---- objects -------------------------------------------------------------------------------------------------------

struct FakeCq {
  ibv_cq cq;
  std::string name;
  CqRing* ring;
};

struct FakeQp {
  ibv_qp qp;
  std::string name;
  QpRecord* rec;
  uint32_t destQpn = 0;
  bool roce = true;
};

std::mutex gMutex;
KeyTable* gKeys = nullptr;
std::map<uint32_t, QpRecord*> gPeerQps;   // mapped queue pair records of peers, by number
std::map<int, KeyTable*> gPeerKeys;       // key tables of peers, by pid
std::map<std::string, CqRing*> gPeerCqs;  // completion queues of peers, by name
std::atomic<long> gPosts{0};
long gPortErrAfter = -1;
// Never destroyed: the event thread waits on them for the life of the process, and a condition variable destroyed at
// exit with a waiter blocks the exit.
std::mutex& gEventMutex = *new std::mutex;
std::condition_variable& gEventCv = *new std::condition_variable;
std::deque<ibv_async_event>& gEvents = *new std::deque<ibv_async_event>;
ibv_device gDevice;
ibv_device* gList[2] = {&gDevice, nullptr};
std::mt19937 gRng{std::random_device{}()};

bool roceLink() {
  const char* l = getenv("PLEXUS_FAKE_IBV_LINK_LAYER");
  return !(l && !strcmp(l, "ib"));
}

KeyTable* keysOf(int pid) {
  if (pid == getpid()) return gKeys;
  auto it = gPeerKeys.find(pid);
  if (it != gPeerKeys.end()) return it->second;
  auto* t =
      static_cast<KeyTable*>(mapShared("/plexus-fakeibv-" + std::to_string(pid) + "-keys", sizeof(KeyTable), false));
  if (t) gPeerKeys[pid] = t;
  return t;
}

bool covered(KeyTable* t, uint32_t key, uint64_t addr, uint64_t length) {
  if (!t || key == 0) return false;
  for (auto& e : t->e)
    if (e.key.load(std::memory_order_acquire) == key) return addr >= e.addr && addr + length <= e.addr + e.length;
  return false;
}

CqRing* cqNamed(const std::string& name) {
  auto it = gPeerCqs.find(name);
  if (it != gPeerCqs.end()) return it->second;
  auto* r = static_cast<CqRing*>(mapShared(name, sizeof(CqRing), false));
  if (r) gPeerCqs[name] = r;
  return r;
}

QpRecord* qpNumbered(uint32_t qpn) {
  auto it = gPeerQps.find(qpn);
  if (it != gPeerQps.end()) return it->second;
  auto* r = static_cast<QpRecord*>(mapShared("/plexus-fakeibv-qp-" + std::to_string(qpn), sizeof(QpRecord), false));
  if (r) gPeerQps[qpn] = r;
  return r;
}

void push(CqRing* r, const ibv_wc& wc) {
  const uint64_t i = r->tail.fetch_add(1);
  for (int spin = 0; i - r->head.load(std::memory_order_acquire) >= kCqCapacity && spin < 10000000; spin++)
    sched_yield();
  CqRing::Slot& s = r->slot[i % kCqCapacity];
  s.wc = wc;
  s.seq.store(i + 1, std::memory_order_release);
}

void raise(ibv_event_type type, int port) {
  ibv_async_event ev{};
  ev.event_type = type;
  ev.element.port_num = port;
  std::lock_guard<std::mutex> lock(gEventMutex);
  gEvents.push_back(ev);
  gEventCv.notify_all();
}

// ---- context operations --------------------------------------------------------------------------------------------

int pollCq(ibv_cq* cq, int n, ibv_wc* wc) {
  CqRing* r = reinterpret_cast<FakeCq*>(cq)->ring;
  int got = 0;
  while (got < n) {
    const uint64_t h = r->head.load(std::memory_order_relaxed);
    CqRing::Slot& s = r->slot[h % kCqCapacity];
    if (s.seq.load(std::memory_order_acquire) != h + 1) break;
    wc[got++] = s.wc;
    r->head.store(h + 1, std::memory_order_release);
  }
  return got;
}

ibv_wc_status execute(FakeQp* q, const ibv_send_wr* wr, QpRecord* peer) {
  if (q->rec->state.load() == IBV_QPS_ERR) return IBV_WC_WR_FLUSH_ERR;
  if (!peer || (peer->pid != getpid() && kill(peer->pid, 0) != 0)) return IBV_WC_RETRY_EXC_ERR;
  Incoming touching(peer);
  if (peer->state.load() == kDestroyed) return IBV_WC_RETRY_EXC_ERR;  // no responder: the requester retries, then fails
  uint64_t length = 0;
  for (int i = 0; i < wr->num_sge; i++) length += wr->sg_list[i].length;
  if (wr->num_sge > 1) return IBV_WC_LOC_LEN_ERR;  // net-ib posts one
  if (length) {
    const ibv_sge& sge = wr->sg_list[0];
    if (!covered(gKeys, sge.lkey, sge.addr, sge.length)) return IBV_WC_LOC_PROT_ERR;
    if (!covered(keysOf(peer->pid), wr->wr.rdma.rkey, wr->wr.rdma.remote_addr, length)) return IBV_WC_REM_ACCESS_ERR;
    iovec local{(void*)(uintptr_t)sge.addr, sge.length}, remote{(void*)(uintptr_t)wr->wr.rdma.remote_addr, length};
    const ssize_t done = wr->opcode == IBV_WR_RDMA_READ ? process_vm_readv(peer->pid, &local, 1, &remote, 1, 0)
                                                        : process_vm_writev(peer->pid, &local, 1, &remote, 1, 0);
    if (done != (ssize_t)length) return errno == ESRCH ? IBV_WC_RETRY_EXC_ERR : IBV_WC_REM_ACCESS_ERR;
  }
  if (wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
    if (peer->recvsPosted.fetch_sub(1) <= 0) {
      peer->recvsPosted.fetch_add(1);
      return IBV_WC_RNR_RETRY_EXC_ERR;
    }
    CqRing* target = cqNamed(peer->cq);
    if (!target) return IBV_WC_RETRY_EXC_ERR;
    ibv_wc in{};
    in.status = IBV_WC_SUCCESS;
    in.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
    in.byte_len = (uint32_t)length;
    in.imm_data = wr->imm_data;
    in.wc_flags = IBV_WC_WITH_IMM;
    in.qp_num = q->destQpn;
    in.src_qp = q->qp.qp_num;
    push(target, in);
  }
  return IBV_WC_SUCCESS;
}

int postSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  auto* q = reinterpret_cast<FakeQp*>(qp);
  std::lock_guard<std::mutex> lock(gMutex);
  for (; wr; wr = wr->next) {
    const int state = q->rec->state.load();
    if (state != IBV_QPS_RTS && state != IBV_QPS_ERR) {
      *bad = wr;
      return EINVAL;
    }
    const ibv_wc_status status = execute(q, wr, qpNumbered(q->destQpn));
    if (status != IBV_WC_SUCCESS) q->rec->state.store(IBV_QPS_ERR);
    if (status != IBV_WC_SUCCESS || (wr->send_flags & IBV_SEND_SIGNALED)) {
      ibv_wc wc{};
      wc.wr_id = wr->wr_id;
      wc.status = status;
      wc.opcode = wr->opcode == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE;
      wc.qp_num = q->qp.qp_num;
      push(reinterpret_cast<FakeCq*>(q->qp.send_cq)->ring, wc);
    }
    if (++gPosts == gPortErrAfter) raise(IBV_EVENT_PORT_ERR, 1);
  }
  return 0;
}

int postRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  auto* q = reinterpret_cast<FakeQp*>(qp);
  for (; wr; wr = wr->next) {
    if (q->rec->state.load() == IBV_QPS_RESET) {
      *bad = wr;
      return EINVAL;
    }
    q->rec->recvsPosted.fetch_add(1);
  }
  return 0;
}

}  // namespace

// ---- the library's symbols -----------------------------------------------------------------------------------------

// <infiniband/verbs.h> wraps these two in macros for its inline helpers; the library exports the plain symbols.
#undef ibv_query_port
#undef ibv_reg_mr

extern "C" {
#define FAKE_API __attribute__((visibility("default")))

FAKE_API ibv_device** ibv_get_device_list(int* n) {
  std::lock_guard<std::mutex> lock(gMutex);
  if (!gKeys) {
    sweepDead();
    gKeys = static_cast<KeyTable*>(
        mapShared("/plexus-fakeibv-" + std::to_string(getpid()) + "-keys", sizeof(KeyTable), true));
    if (!gKeys) {
      shm_unlink(("/plexus-fakeibv-" + std::to_string(getpid()) + "-keys").c_str());
      gKeys = static_cast<KeyTable*>(
          mapShared("/plexus-fakeibv-" + std::to_string(getpid()) + "-keys", sizeof(KeyTable), true));
    }
    atexit([] { shm_unlink(("/plexus-fakeibv-" + std::to_string(getpid()) + "-keys").c_str()); });
    const char* after = getenv("PLEXUS_FAKE_IBV_PORT_ERR_AFTER");
    if (after) gPortErrAfter = atol(after);
    snprintf(gDevice.name, sizeof gDevice.name, "fake_0");
    gDevice.node_type = IBV_NODE_CA;
    gDevice.transport_type = IBV_TRANSPORT_IB;
  }
  if (n) *n = gKeys ? 1 : 0;
  return gList;
}
FAKE_API void ibv_free_device_list(ibv_device**) {}
FAKE_API const char* ibv_get_device_name(ibv_device* d) { return d->name; }

FAKE_API ibv_context* ibv_open_device(ibv_device* d) {
  auto* c = new ibv_context{};
  c->device = d;
  c->ops.poll_cq = pollCq;
  c->ops.post_send = postSend;
  c->ops.post_recv = postRecv;
  return c;
}
FAKE_API int ibv_close_device(ibv_context* c) {
  delete c;
  return 0;
}

FAKE_API int ibv_query_device(ibv_context*, ibv_device_attr* a) {
  memset(a, 0, sizeof *a);
  a->node_guid = htobe64(0x0002c90300fa4e01ull);
  a->phys_port_cnt = 1;
  a->max_qp_wr = 16384;
  a->max_cqe = kCqCapacity;
  return 0;
}

// The exported symbol fills the compat prefix of ibv_port_attr (everything up to port_cap_flags2).
FAKE_API int ibv_query_port(ibv_context*, uint8_t port, _compat_ibv_port_attr* compat) {
  if (port != 1) return EINVAL;
  auto* a = reinterpret_cast<ibv_port_attr*>(compat);
  memset(a, 0, offsetof(ibv_port_attr, port_cap_flags2));
  a->state = IBV_PORT_ACTIVE;
  a->max_mtu = a->active_mtu = IBV_MTU_4096;
  a->gid_tbl_len = 2;
  a->lid = roceLink() ? 0 : 7;
  a->active_width = 2;   // 4X
  a->active_speed = 64;  // HDR: 4X HDR = 200 Gb/s
  a->link_layer = roceLink() ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
  return 0;
}

FAKE_API int ibv_query_gid(ibv_context*, uint8_t port, int index, ibv_gid* gid) {
  if (port != 1 || index < 0 || index > 1) return EINVAL;
  memset(gid, 0, sizeof *gid);
  if (index == 0) {  // fe80::1
    gid->raw[0] = 0xfe, gid->raw[1] = 0x80, gid->raw[15] = 1;
  } else {  // ::ffff:127.0.0.1
    gid->raw[10] = gid->raw[11] = 0xff, gid->raw[12] = 127, gid->raw[15] = 1;
  }
  return 0;
}

FAKE_API ibv_pd* ibv_alloc_pd(ibv_context* c) {
  auto* pd = new ibv_pd{};
  pd->context = c;
  return pd;
}
FAKE_API int ibv_dealloc_pd(ibv_pd* pd) {
  delete pd;
  return 0;
}

FAKE_API ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  (void)access;
  std::lock_guard<std::mutex> lock(gMutex);
  for (auto& e : gKeys->e)
    if (e.key.load() == 0) {
      uint32_t key;
      do key = (uint32_t)gRng() | 1;
      while (key == 0);
      e.addr = (uint64_t)(uintptr_t)addr;
      e.length = length;
      e.key.store(key, std::memory_order_release);
      auto* mr = new ibv_mr{};
      mr->context = pd->context;
      mr->pd = pd;
      mr->addr = addr;
      mr->length = length;
      mr->lkey = mr->rkey = key;
      return mr;
    }
  errno = ENOMEM;
  return nullptr;
}
FAKE_API ibv_mr* ibv_reg_dmabuf_mr(ibv_pd*, uint64_t, size_t, uint64_t, int, int) {
  errno = EOPNOTSUPP;
  return nullptr;
}
FAKE_API int ibv_dereg_mr(ibv_mr* mr) {
  std::lock_guard<std::mutex> lock(gMutex);
  for (auto& e : gKeys->e)
    if (e.key.load() == mr->lkey) e.key.store(0);
  delete mr;
  return 0;
}

FAKE_API ibv_cq* ibv_create_cq(ibv_context* c, int cqe, void*, ibv_comp_channel*, int) {
  if (cqe > kCqCapacity) {
    errno = EINVAL;
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(gMutex);
  auto* f = new FakeCq{};
  for (int tries = 0; tries < 100 && !f->ring; tries++) {
    f->name = "/plexus-fakeibv-" + std::to_string(getpid()) + "-cq-" + std::to_string(gRng());
    f->ring = static_cast<CqRing*>(mapShared(f->name, sizeof(CqRing), true));
  }
  if (!f->ring) {
    delete f;
    errno = ENOMEM;
    return nullptr;
  }
  f->cq.context = c;
  f->cq.cqe = cqe;
  return &f->cq;
}
FAKE_API int ibv_destroy_cq(ibv_cq* cq) {
  auto* f = reinterpret_cast<FakeCq*>(cq);
  munmap(f->ring, sizeof(CqRing));
  shm_unlink(f->name.c_str());
  delete f;
  return 0;
}

FAKE_API ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* init) {
  if (init->qp_type != IBV_QPT_RC || !init->send_cq || !init->recv_cq) {
    errno = EINVAL;
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(gMutex);
  auto* q = new FakeQp{};
  for (int tries = 0; tries < 100 && !q->rec; tries++) {
    q->qp.qp_num = (uint32_t)(gRng() & 0xffffff) | 1;
    q->name = "/plexus-fakeibv-" + std::to_string(getpid()) + "-qp-" + std::to_string(q->qp.qp_num);
    // Peers find it by number alone: a link from the numbered name.
    const std::string byNumber = "/plexus-fakeibv-qp-" + std::to_string(q->qp.qp_num);
    if (access(("/dev/shm" + byNumber).c_str(), F_OK) == 0) continue;  // taken
    q->rec = static_cast<QpRecord*>(mapShared(q->name, sizeof(QpRecord), true));
    if (q->rec && link(("/dev/shm" + q->name).c_str(), ("/dev/shm" + byNumber).c_str()) != 0) {
      munmap(q->rec, sizeof(QpRecord));
      shm_unlink(q->name.c_str());
      q->rec = nullptr;
    }
  }
  if (!q->rec) {
    delete q;
    errno = ENOMEM;
    return nullptr;
  }
  q->rec->pid = getpid();
  snprintf(q->rec->cq, sizeof q->rec->cq, "%s", reinterpret_cast<FakeCq*>(init->recv_cq)->name.c_str());
  q->rec->state.store(IBV_QPS_RESET);
  q->qp.context = pd->context;
  q->qp.pd = pd;
  q->qp.send_cq = init->send_cq;
  q->qp.recv_cq = init->recv_cq;
  q->qp.qp_type = IBV_QPT_RC;
  q->qp.state = IBV_QPS_RESET;
  q->roce = roceLink();
  return &q->qp;
}

FAKE_API int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* a, int mask) {
  auto* q = reinterpret_cast<FakeQp*>(qp);
  const int from = q->rec->state.load();
  if (!(mask & IBV_QP_STATE)) return EINVAL;
  int needs = 0;
  switch (a->qp_state) {
    case IBV_QPS_INIT:
      if (from != IBV_QPS_RESET && from != IBV_QPS_INIT) return EINVAL;
      needs = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
      if ((mask & IBV_QP_PORT) && a->port_num != 1) return EINVAL;
      break;
    case IBV_QPS_RTR:
      if (from != IBV_QPS_INIT) return EINVAL;
      needs = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
              IBV_QP_MIN_RNR_TIMER;
      if (q->roce && !a->ah_attr.is_global) return EINVAL;  // RoCE routes by GID
      if (!q->roce && a->ah_attr.dlid == 0) return EINVAL;  // InfiniBand routes by LID
      q->destQpn = a->dest_qp_num;
      break;
    case IBV_QPS_RTS:
      if (from != IBV_QPS_RTR) return EINVAL;
      needs = IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
      break;
    case IBV_QPS_ERR:
    case IBV_QPS_RESET:
      break;
    default:
      return EINVAL;
  }
  if ((mask & needs) != needs) return EINVAL;
  q->rec->state.store(a->qp_state);
  q->qp.state = a->qp_state;
  return 0;
}

FAKE_API int ibv_destroy_qp(ibv_qp* qp) {
  auto* q = reinterpret_cast<FakeQp*>(qp);
  q->rec->state.store(kDestroyed);
  // A peer's write already under way finishes first (bounded: a peer that died mid-write leaves its count).
  for (int i = 0; q->rec->incoming.load() > 0 && i < 5000; i++) usleep(1000);
  shm_unlink(("/plexus-fakeibv-qp-" + std::to_string(q->qp.qp_num)).c_str());
  munmap(q->rec, sizeof(QpRecord));
  shm_unlink(q->name.c_str());
  delete q;
  return 0;
}

FAKE_API int ibv_get_async_event(ibv_context*, ibv_async_event* ev) {
  std::unique_lock<std::mutex> lock(gEventMutex);
  gEventCv.wait(lock, [] { return !gEvents.empty(); });
  *ev = gEvents.front();
  gEvents.pop_front();
  return 0;
}
FAKE_API void ibv_ack_async_event(ibv_async_event*) {}

FAKE_API const char* ibv_event_type_str(ibv_event_type t) {
  return t == IBV_EVENT_PORT_ERR ? "port error" : t == IBV_EVENT_PORT_ACTIVE ? "port active" : "event";
}
FAKE_API const char* ibv_wc_status_str(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_SUCCESS:
      return "success";
    case IBV_WC_LOC_PROT_ERR:
      return "local protection error";
    case IBV_WC_WR_FLUSH_ERR:
      return "Work Request Flushed Error";
    case IBV_WC_REM_ACCESS_ERR:
      return "remote access error";
    case IBV_WC_RETRY_EXC_ERR:
      return "transport retry counter exceeded";
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return "RNR retry counter exceeded";
    default:
      return "other error";
  }
}

// A test's hook: IBV_EVENT_PORT_ERR on `port` now.
FAKE_API void plexusFakeIbvPortError(int port) { raise(IBV_EVENT_PORT_ERR, port); }
}
