#include "comm.h"

#include <atomic>
#include <climits>
#include <cstring>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "devices.h"
#include "log.h"
#include "socket.h"
#include "worker.h"

namespace plexus::net_ucx {

const Knobs& knobs() {
  static const Knobs k = [] {
    const char* reg = knob("UCX_REGISTER");
    const char* mode = knob("UCX_ERROR_MODE");
    if (mode && strcmp(mode, "peer") != 0 && strcmp(mode, "none") != 0)
      UCX_WARN("UCX_ERROR_MODE=\"%s\" is neither \"none\" nor \"peer\"; using none", mode);
    return Knobs{knobSeconds("UCX_CONNECT_TIMEOUT", 120), knobSeconds("UCX_CLOSE_TIMEOUT", 5),
                 !reg || strcmp(reg, "0") != 0, mode && strcmp(mode, "peer") == 0};
  }();
  return k;
}

namespace {

constexpr uint32_t kHandleMagic = 0x58435550;   // "PUCX"
constexpr uint32_t kHelloMagic = 0x4c454850;    // "PHEL"
constexpr uint32_t kWelcomeMagic = 0x4c455750;  // "PWEL"
constexpr uint16_t kProtocolVersion = 1;
constexpr uint32_t kMaxAddressBytes = 1 << 20;  // a worker address is a few hundred bytes: more is garbage

constexpr int kSendRequests = NCCL_NET_MAX_REQUESTS * kMaxRecvs;  // the rule: 32 in flight, times maxRecvs
constexpr int kRecvRequests = NCCL_NET_MAX_REQUESTS;
constexpr uint64_t kConnTagMask = 0xffffffff00000000ull;
constexpr uint64_t kFullTagMask = ~0ull;
constexpr auto kPeerCheckPeriod = std::chrono::milliseconds(100);
// What a peer sent before it closed may still be on its way (a socket buffer, a shared-memory FIFO) when
// its socket reports the close: a request gets this long to complete before it fails.
constexpr auto kPeerGoneGrace = std::chrono::seconds(1);
// A close waits for transfers in flight; once the peer is gone, UCX delivering nothing for this long means
// nothing more will come.
constexpr auto kDrainQuiet = std::chrono::milliseconds(50);

uint64_t tagOf(uint32_t connId, int tag) { return (uint64_t{connId} << 32) | static_cast<uint32_t>(tag); }
// Connection ids stay below 2^31 (Worker::newConnId): with the top bit set they name a connection's control
// messages, apart from any NCCL tag of its data.
uint64_t controlTag(uint32_t connId) { return uint64_t{connId | 0x80000000u} << 32; }

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

uint64_t randomNonce() {
  static std::mutex mutex;
  static std::mt19937_64 generator{std::random_device{}()};
  std::lock_guard<std::mutex> lock(mutex);
  uint64_t v;
  do v = generator();
  while (v == 0);
  return v;
}

// What listen() writes into the handle. Both ends run this plugin on one architecture (as NCCL requires),
// so the handle and the handshake use native byte order.
struct Handle {
  uint32_t magic;
  uint16_t version;
  uint16_t reserved;
  uint64_t nonce;  // names the listen: a handle whose listen is gone is refused, never taken for another's
  SockAddr addr;   // the listen's socket
};
static_assert(sizeof(Handle) <= NCCL_NET_HANDLE_MAXSIZE, "the listen handle must fit in NCCL's");

// The handshake: the sender says Hello; the receiver answers Welcome, then its worker address.
struct Hello {
  uint32_t magic;
  uint16_t version;
  uint16_t reserved;
  uint64_t nonce;
};
enum Verdict : uint32_t { kAccepted = 0, kUnknownListen = 1 };
struct Welcome {
  uint32_t magic;
  uint32_t verdict;
  uint32_t connId;
  uint32_t addressBytes;
};

enum class Step { Connect, SendHello, RecvWelcome, RecvAddress, RecvHello, SendWelcome, Confirm };
const char* stepName(Step s) {
  switch (s) {
    case Step::Connect:
      return "connecting";
    case Step::SendHello:
      return "sending the hello";
    case Step::RecvWelcome:
    case Step::RecvAddress:
      return "waiting for the receiver's answer";
    case Step::RecvHello:
      return "waiting for the sender's hello";
    case Step::SendWelcome:
      return "sending the worker address";
    case Step::Confirm:
      return "exchanging the first message over UCX";
  }
  return "?";
}

struct Handshake {
  Step step;
  size_t done = 0;  // bytes of the current message moved so far
  Hello hello{};
  Welcome welcome{};
  std::vector<uint8_t> bytes;  // the worker address received, or the welcome and address to send
  Clock::time_point deadline = Clock::now() + seconds(knobs().connectTimeoutS);
  bool vouched = false;  // accept side: the hello named this listen, so its failure is the caller's
  explicit Handshake(Step s) : step(s) {}
};

// ---- Requests ------------------------------------------------------------------------------------

struct DataComm;
struct Request;

struct Sub {  // one buffer of a request: one UCP operation
  Request* req;
  void* ucx;    // UCP's request while in flight
  size_t size;  // as posted
  ucp_tag_recv_info_t info;
  ucs_status_t status;
  bool done;
};

enum class Op : uint8_t { Send, Recv, Flush };
constexpr uint32_t kRequestLive = 0x5145524c;

struct Request {
  uint32_t magic;  // kRequestLive from isend()/irecv() until test() reports it done
  Op op;
  int n;
  int pending;
  DataComm* comm;
  Sub subs[kMaxRecvs];
};

// iflush() of host memory has nothing to wait for: it hands out this request, done at once.
Request gFlushDone{kRequestLive, Op::Flush, 0, 0, nullptr, {}};

void complete(Sub* s, ucs_status_t status) {
  s->ucx = nullptr;
  s->status = status;
  s->done = true;
  s->req->pending--;
}
void onSent(void* ucx, ucs_status_t status, void* user) {
  complete(static_cast<Sub*>(user), status);
  ucp_request_free(ucx);
}
void onReceived(void* ucx, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user) {
  auto* s = static_cast<Sub*>(user);
  if (status == UCS_OK) s->info = *info;
  complete(s, status);
  ucp_request_free(ucx);
}

constexpr uint32_t kRegionMagic = 0x4e474552;
struct MemRegion {
  uint32_t magic = kRegionMagic;
  uintptr_t base = 0;
  size_t size = 0;
  ucp_mem_h memh = nullptr;  // null: UCX registers on the fly (or nothing to register)
  std::shared_ptr<Worker> worker;
};

// A registered buffer saves UCX the registration-cache lookup, when the data lies inside it (and it was
// registered with this comm's UCP context).
void useRegion(ucp_request_param_t* p, void* mhandle, const void* data, size_t size, const Worker& worker) {
  auto* mr = static_cast<MemRegion*>(mhandle);
  if (!mr || mr->magic != kRegionMagic || !mr->memh || mr->worker->context() != worker.context()) return;
  auto a = reinterpret_cast<uintptr_t>(data);
  if (a < mr->base || a + size > mr->base + mr->size) return;
  p->op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
  p->memh = mr->memh;
}

// ---- Comms ---------------------------------------------------------------------------------------

enum class Kind : uint32_t { Listen = 0x4e53494c, Send = 0x444e4553, Recv = 0x56434552, Closed = 0x44534f4c };

struct Comm {
  Kind kind;
  std::shared_ptr<Worker> worker;
  Socket sock;
  Comm(Kind k, std::shared_ptr<Worker> w, Socket s) : kind(k), worker(std::move(w)), sock(std::move(s)) {}
  virtual ~Comm() { kind = Kind::Closed; }
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;
};

template <class T>
T* as(void* p, Kind kind) {
  auto* c = static_cast<Comm*>(p);
  return c && c->kind == kind ? static_cast<T*>(c) : nullptr;
}

// Waits, progressing, until UCP completes `request` (nullptr or an error: nothing to wait for), the
// peer's socket closes (nothing more can leave), or the close timeout passes. Worker mutex held.
void waitBounded(Worker& worker, ucs_status_ptr_t request, const Socket& peer, const char* what,
                 const std::string& name) {
  if (!UCS_PTR_IS_PTR(request)) return;
  auto deadline = Clock::now() + seconds(knobs().closeTimeoutS);
  auto nextPeerCheck = Clock::now();
  bool peerClosed = false;
  while (ucp_request_check_status(request) == UCS_INPROGRESS && !peerClosed) {
    ucp_worker_progress(worker.get());
    auto now = Clock::now();
    if (now >= nextPeerCheck) {
      nextPeerCheck = now + std::chrono::milliseconds(10);
      peerClosed = peer && socketPeerClosed(peer);
    }
    if (now >= deadline) {
      UCX_WARN(
          "closing the connection with %s: UCX did not %s within %g s (the peer stopped taking data); "
          "gave up, raise PLEXUS_UCX_CLOSE_TIMEOUT if the peer is only slow",
          name.c_str(), what, knobs().closeTimeoutS);
      break;
    }
  }
  if (ucp_request_check_status(request) != UCS_OK) worker.flushFailed();  // in error, or given up
  ucp_request_free(request);
}

// A send or receive comm: a connection id, a pool of requests, and the peer's liveness.
struct DataComm : Comm {
  std::string peer;  // the peer's address, for log lines
  uint32_t connId = 0;
  ncclResult_t failed = ncclSuccess;  // sticky, once the peer is known gone
  bool peerGone = false;
  Clock::time_point peerGoneAt{}, nextPeerCheck{};
  // Requests come in blocks of kRequestBlock, allocated as needed up to maxRequests (NCCL keeps 8 in flight
  // per connection; the rule allows 256 sends) and never moved: UCP holds pointers into them.
  static constexpr int kRequestBlock = 32;
  int maxRequests;
  std::vector<std::unique_ptr<Request[]>> blocks;
  std::vector<Request*> idle;
  std::unique_ptr<Handshake> hs;  // until the connection is ready

  DataComm(Kind k, std::shared_ptr<Worker> w, Socket s, std::string p, int nrequests)
      : Comm(k, std::move(w), std::move(s)), peer(std::move(p)), maxRequests(nrequests) {}

  // Everything below runs with worker->mutex() held.
  Request* take(Op op, int n) {
    if (idle.empty() && inFlight() < maxRequests) {
      blocks.emplace_back(new Request[kRequestBlock]());
      for (int i = kRequestBlock - 1; i >= 0; i--) idle.push_back(&blocks.back()[i]);
    }
    if (idle.empty()) return nullptr;
    Request* r = idle.back();
    idle.pop_back();
    r->magic = kRequestLive;
    r->op = op;
    r->n = n;
    r->pending = n;
    r->comm = this;
    for (int i = 0; i < n; i++) r->subs[i] = Sub{r, nullptr, 0, {}, UCS_OK, false};
    return r;
  }
  void give(Request* r) {
    r->magic = 0;
    idle.push_back(r);
  }
  int inFlight() const { return static_cast<int>(blocks.size() * kRequestBlock - idle.size()); }
  const char* direction() const { return kind == Kind::Send ? "to" : "from"; }
  virtual bool endpointFailed() const { return false; }

  void pollPeer(Clock::time_point now) {
    if (peerGone || now < nextPeerCheck) return;
    nextPeerCheck = now + kPeerCheckPeriod;
    if (socketPeerClosed(sock) || endpointFailed()) {
      peerGone = true;
      peerGoneAt = now;
      UCX_INFO(NCCL_NET, "the connection %s %s (id %u) was closed by the peer", direction(), peer.c_str(), connId);
    }
  }

  // r is still in flight: it fails once the peer has been gone for the grace period.
  ncclResult_t stalled(Request* r) {
    if (failed != ncclSuccess) return failed;
    auto now = Clock::now();
    pollPeer(now);
    if (!peerGone || now - peerGoneAt < kPeerGoneGrace) return ncclSuccess;
    failed = ncclRemoteError;
    UCX_WARN(
        "%s %s: the peer closed the connection or its process exited, with %d request(s) here still in "
        "flight (one a %s of %zu bytes) that can never complete; look at the peer's log for why it stopped",
        kind == Kind::Send ? "sending to" : "receiving from", peer.c_str(), inFlight(),
        r->op == Op::Send ? "send" : "receive", r->subs[0].size);
    return failed;
  }

  ncclResult_t finish(Request* r, int* done, int* sizes) {
    ncclResult_t res = ncclSuccess;
    for (int i = 0; i < r->n; i++) {
      const Sub& s = r->subs[i];
      if (s.status != UCS_OK && res == ncclSuccess) res = report(r, i);
      if (sizes) sizes[i] = static_cast<int>(r->op == Op::Recv ? s.info.length : s.size);
    }
    give(r);
    if (res == ncclSuccess)
      *done = 1;
    else if (res == ncclRemoteError)
      failed = res;
    return res;
  }

  ncclResult_t report(Request* r, int i) {
    const Sub& s = r->subs[i];
    if (s.status == UCS_ERR_MESSAGE_TRUNCATED) {
      UCX_WARN(
          "receiving from %s: a message was larger than the %zu-byte buffer %d of %d it matched; a send must "
          "not be larger than the receive it meets",
          peer.c_str(), s.size, i, r->n);
    } else {
      UCX_WARN(
          "%s %zu bytes %s %s failed: %s; the peer's process probably exited or the network failed: look at "
          "the peer's log",
          r->op == Op::Send ? "sending" : "receiving", s.size, direction(), peer.c_str(), ucs_status_string(s.status));
    }
    // A transfer that failed for any reason but a size mismatch or a shortage here failed at the peer or on
    // the way to it (UCX says "Input/output error" for a peer process gone under shared memory).
    if (s.status == UCS_ERR_MESSAGE_TRUNCATED) return ncclInvalidUsage;
    if (s.status == UCS_ERR_NO_MEMORY || s.status == UCS_ERR_NO_RESOURCE) return ncclSystemError;
    return ncclRemoteError;
  }

  // On close: UCX may still move data of a request in flight, into or out of memory the core frees once the
  // close returns (a receive whose message is already landing cannot be cancelled, a send cannot be taken
  // back). So the close cancels the receives it can, progresses until the rest complete, or the peer is gone
  // and UCX has had nothing to deliver for a while, or the close timeout passes; only then are they freed, and
  // no UCP callback reaches this comm's memory afterwards.
  template <class F>
  void forEachRunning(F f) {
    for (auto& block : blocks)
      for (int b = 0; b < kRequestBlock; b++) {
        Request& r = block[b];
        if (r.magic != kRequestLive) continue;
        for (int i = 0; i < r.n; i++)
          if (r.subs[i].ucx) f(r, r.subs[i]);
      }
  }
  int running() {
    int n = 0;
    forEachRunning([&](Request&, Sub&) { n++; });
    return n;
  }
  void releaseRequests() {
    // A receive not matched yet completes here, cancelled (its callback frees it).
    forEachRunning([&](Request& r, Sub& s) {
      if (r.op == Op::Recv) ucp_request_cancel(worker->get(), s.ucx);
    });
    drain();
    forEachRunning([&](Request&, Sub& s) {
      ucp_request_free(s.ucx);  // no callback from now on
      s.ucx = nullptr;
    });
    for (auto& block : blocks)
      for (int b = 0; b < kRequestBlock; b++) block[b].magic = 0;
  }
  void drain() {
    int left = running();
    if (left == 0) return;
    const auto start = Clock::now(), deadline = start + seconds(knobs().closeTimeoutS);
    auto lastEvent = start;
    while ((left = running()) > 0) {
      const auto now = Clock::now();
      if (ucp_worker_progress(worker->get()) > 0) lastEvent = now;
      pollPeer(now);
      if (peerGone && now - lastEvent >= kDrainQuiet) break;  // the peer is gone and what it sent is in
      if (now >= deadline) {
        UCX_WARN(
            "closing the connection %s %s: %d transfer(s) of its requests still in flight after %g s; UCX may "
            "still move their data after the close. Raise PLEXUS_UCX_CLOSE_TIMEOUT if the peer is only slow",
            direction(), peer.c_str(), left, knobs().closeTimeoutS);
        return;
      }
    }
    if (left > 0)
      UCX_INFO(NCCL_NET, "closing the connection %s %s: the peer is gone, %d transfer(s) dropped", direction(),
               peer.c_str(), left);
  }
};

struct SendComm : DataComm {
  ucp_ep_h ep = nullptr;
  std::atomic<int> epStatus{UCS_OK};
  void* confirm = nullptr;  // the handshake's synchronous send, in flight

  SendComm(std::shared_ptr<Worker> w, Socket s, std::string p)
      : DataComm(Kind::Send, std::move(w), std::move(s), std::move(p), kSendRequests) {}

  ~SendComm() override {
    std::lock_guard<std::mutex> lock(worker->mutex());
    // Requests still in flight mean an abort: they are dropped. Otherwise what the completed sends left in UCX's
    // own buffers is handed to the kernel first (below), so that the receiver still gets it.
    bool abort = failed != ncclSuccess || peerGone || endpointFailed() || inFlight() > 0;
    releaseRequests();
    if (confirm) ucp_request_free(confirm);
    if (!ep) return;
    if (knobs().peerErrorMode) worker->unwatch(ep);
    ucp_request_param_t param{};
    // Nothing here waits for the peer. An endpoint flush, and so a flush-mode close, completes over tcp only when
    // the peer's worker answers it (an empty put, acknowledged by the peer's progress), and the peer may not be
    // calling into UCX now. What has to leave before the close is local: a completed send is in UCX's transmit
    // buffer (tcp: the part of a message the socket did not take yet) or in the kernel, which delivers it after
    // the close. A worker flush waits for exactly that (the transports' buffers; UCX_FLUSH_WORKER_EPS=n, set in
    // worker.cc, keeps it from flushing endpoints), bounded, and not at all once the peer's socket is closed.
    // A connect that failed or was abandoned (hs) carried no data.
    if (!hs && !abort)
      waitBounded(*worker, ucp_worker_flush_nbx(worker->get(), &param), sock, "send what it holds", peer);
    if (abort && !knobs().peerErrorMode) {
      // A flush-mode close towards a dead peer never completes, and UCX 1.13 then asserts in
      // ucp_worker_destroy (ep refcount). Left alone, the endpoint goes with the worker, quietly.
      UCX_INFO(NCCL_NET, "closing the connection to %s after a failure: its endpoint goes with the worker",
               peer.c_str());
      return;
    }
    // Then the close starts and is left to UCX: forced where UCX allows it (the peer error mode: lanes discarded,
    // nothing sent), else in flush mode, which finishes inside UCX whenever the worker progresses next and the
    // peer has answered; the worker keeps the request and waits for it before it is destroyed (worker.cc). No
    // callback: this comm's memory is gone by then.
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = knobs().peerErrorMode ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t closing = ucp_ep_close_nbx(ep, &param);
    if (UCS_PTR_IS_PTR(closing))
      worker->closing(closing);
    else if (UCS_PTR_IS_ERR(closing))
      UCX_INFO(NCCL_NET,
               "closing the connection to %s: UCX refused to close the endpoint (%s); it goes with the worker",
               peer.c_str(), ucs_status_string(UCS_PTR_STATUS(closing)));
    worker->progress();  // start it
  }

  bool endpointFailed() const override { return epStatus.load() != UCS_OK; }

  // The handshake ends with a zero-byte synchronous send on the connection's control tag: it completes once
  // the receiver matched it and UCX's acknowledgement came back, so UCX's wireup is done both ways before
  // any data moves (UCX 1.13 aborts when a peer is lost while its reverse wireup is still pending).
  ncclResult_t startConfirm() {
    std::lock_guard<std::mutex> lock(worker->mutex());
    ucp_request_param_t param{};
    ucs_status_ptr_t r = ucp_tag_send_sync_nbx(ep, nullptr, 0, controlTag(connId), &param);
    if (UCS_PTR_IS_ERR(r)) {
      UCX_WARN("connect() to %s: UCX refused the first message: %s", peer.c_str(),
               ucs_status_string(UCS_PTR_STATUS(r)));
      return ncclRemoteError;
    }
    confirm = r;  // nullptr: done already
    return ncclSuccess;
  }
  ucs_status_t pollConfirm() {
    std::lock_guard<std::mutex> lock(worker->mutex());
    worker->progress();
    if (!confirm) return UCS_OK;
    ucs_status_t status = ucp_request_check_status(confirm);
    if (status != UCS_INPROGRESS) {
      ucp_request_free(confirm);
      confirm = nullptr;
    }
    return status;
  }

  ncclResult_t createEndpoint(const std::vector<uint8_t>& address, uint32_t id) {
    std::lock_guard<std::mutex> lock(worker->mutex());
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    params.address = reinterpret_cast<const ucp_address_t*>(address.data());
    params.err_mode = knobs().peerErrorMode ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    if (knobs().peerErrorMode) {
      params.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
      params.err_handler = worker->errorHandler();
    }
    ucs_status_t status = ucp_ep_create(worker->get(), &params, &ep);
    if (status != UCS_OK) {
      ep = nullptr;
      const char* tls = getenv("UCX_TLS");
      UCX_WARN(
          "connect() to %s: UCX cannot reach the receiver's worker: %s; with UCX_TLS=%s the two sides may "
          "share no transport (shared memory reaches this host only)%s",
          peer.c_str(), ucs_status_string(status), tls ? tls : "(unset)",
          knobs().peerErrorMode ? ", and PLEXUS_UCX_ERROR_MODE=peer rules out transports that cannot report "
                                  "a failed peer (shared memory, for one)"
                                : "");
      return ncclRemoteError;
    }
    if (knobs().peerErrorMode) worker->watch(ep, &epStatus);
    connId = id;
    worker->progress();  // start the wireup
    return ncclSuccess;
  }
};

struct RecvComm : DataComm {
  void* confirm = nullptr;  // the receive of the handshake's synchronous send, in flight

  RecvComm(std::shared_ptr<Worker> w, Socket s, std::string p)
      : DataComm(Kind::Recv, std::move(w), std::move(s), std::move(p), kRecvRequests) {}

  ~RecvComm() override {
    std::lock_guard<std::mutex> lock(worker->mutex());
    releaseRequests();
    if (confirm) {
      ucp_request_cancel(worker->get(), confirm);
      ucp_request_free(confirm);
    }
    if (hs) return;  // never connected: nothing went through UCX
    // UCX answers a rendezvous send after the receive completed here (the sender's send completes
    // on that answer): flush the worker so that the answer leaves before the socket closes. That flush is
    // local (transport buffers; no endpoint flush, see ~SendComm), so it does not wait for the sender to progress.
    ucp_request_param_t param{};
    waitBounded(*worker, ucp_worker_flush_nbx(worker->get(), &param), sock, "flush the worker", peer);
  }

  ncclResult_t startConfirm() {
    std::lock_guard<std::mutex> lock(worker->mutex());
    ucp_request_param_t param{};
    ucs_status_ptr_t r = ucp_tag_recv_nbx(worker->get(), nullptr, 0, controlTag(connId), kFullTagMask, &param);
    if (UCS_PTR_IS_ERR(r)) {
      UCX_WARN("accept() of %s: UCX refused a receive: %s", peer.c_str(), ucs_status_string(UCS_PTR_STATUS(r)));
      return ncclSystemError;
    }
    confirm = r;  // nullptr: the message was here already
    return ncclSuccess;
  }
  ucs_status_t pollConfirm() {
    std::lock_guard<std::mutex> lock(worker->mutex());
    worker->progress();
    if (!confirm) return UCS_OK;
    ucs_status_t status = ucp_request_check_status(confirm);
    if (status != UCS_INPROGRESS) {
      ucp_request_free(confirm);
      confirm = nullptr;
    }
    return status;
  }
};

struct ListenComm : Comm {
  uint64_t nonce;
  std::string name;                              // our address, for log lines
  std::list<std::unique_ptr<RecvComm>> pending;  // accepted sockets still in their handshake
  ListenComm(std::shared_ptr<Worker> w, Socket s, uint64_t n, std::string a)
      : Comm(Kind::Listen, std::move(w), std::move(s)), nonce(n), name(std::move(a)) {}
};

// The plugin context: one per init() (NCCL: per communicator).
struct Context {
  static constexpr uint64_t kMagic = 0x5854434e58435550ull;
  uint64_t magic = kMagic;
  uint64_t commId;
  std::mutex mutex;
  std::map<int, std::shared_ptr<Worker>> workers;
  std::map<std::string, std::unique_ptr<SendComm>> connecting;  // by the handle's bytes and device

  explicit Context(uint64_t id) : commId(id) {}
  ~Context() { magic = 0; }

  ncclResult_t worker(int dev, std::shared_ptr<Worker>* out) {  // mutex held
    std::shared_ptr<Worker>& w = workers[dev];
    if (!w) {
      ncclResult_t res = Worker::create(dev, &w);
      if (res != ncclSuccess) {
        workers.erase(dev);
        return res;
      }
    }
    *out = w;
    return ncclSuccess;
  }
};

Context* asContext(void* p) {
  auto* c = static_cast<Context*>(p);
  return c && c->magic == Context::kMagic ? c : nullptr;
}

bool validDevice(int dev, const char* call) {
  int n = static_cast<int>(devices().size());
  if (dev >= 0 && dev < n) return true;
  UCX_WARN("%s(): device %d does not exist: the UCX plugin has %d (devices() tells)", call, dev, n);
  return false;
}

// ---- Handshake -----------------------------------------------------------------------------------

// The sender's side, as far as the socket allows without blocking: *ready once the endpoint exists.
ncclResult_t advanceConnect(SendComm* c, bool* ready) {
  Handshake& hs = *c->hs;
  int err = 0;
  while (err == 0) {
    switch (hs.step) {
      case Step::Connect:
        err = socketConnected(c->sock);
        if (err == 0) hs.step = Step::SendHello;
        break;
      case Step::SendHello:
        err = socketSend(c->sock, &hs.hello, sizeof(hs.hello), &hs.done);
        if (err == 0) hs.step = Step::RecvWelcome, hs.done = 0;
        break;
      case Step::RecvWelcome: {
        err = socketRecv(c->sock, &hs.welcome, sizeof(hs.welcome), &hs.done);
        if (err != 0) break;
        const Welcome& w = hs.welcome;
        if (w.magic == kWelcomeMagic && w.verdict == kUnknownListen) {
          UCX_WARN(
              "connect() to %s: the listening side does not know this handle: the listen() that wrote it was "
              "closed (its port is now another listen's); use the handle of a live listen",
              c->peer.c_str());
          return ncclInvalidArgument;
        }
        if (w.magic != kWelcomeMagic || w.verdict != kAccepted || w.connId == 0 || w.addressBytes == 0 ||
            w.addressBytes > kMaxAddressBytes) {
          UCX_WARN(
              "connect() to %s: the answer is not net-ucx's (magic 0x%08x, verdict %u, %u address bytes); "
              "another program may own that port now, or the two sides run different plugin versions",
              c->peer.c_str(), w.magic, w.verdict, w.addressBytes);
          return ncclRemoteError;
        }
        hs.bytes.resize(w.addressBytes);
        hs.step = Step::RecvAddress, hs.done = 0;
        break;
      }
      case Step::RecvAddress:
        err = socketRecv(c->sock, hs.bytes.data(), hs.bytes.size(), &hs.done);
        if (err != 0) break;
        if (ncclResult_t res = c->createEndpoint(hs.bytes, hs.welcome.connId); res != ncclSuccess) return res;
        if (ncclResult_t res = c->startConfirm(); res != ncclSuccess) return res;
        hs.step = Step::Confirm;
        break;
      case Step::Confirm: {
        ucs_status_t status = c->pollConfirm();
        if (status == UCS_INPROGRESS) {
          err = socketPeerClosed(c->sock) ? kEof : EAGAIN;
          break;
        }
        if (status != UCS_OK) {
          UCX_WARN(
              "connect() to %s: the first message over UCX failed: %s; the receiver may have exited, or UCX "
              "cannot reach it with UCX_TLS=%s",
              c->peer.c_str(), ucs_status_string(status), getenv("UCX_TLS") ? getenv("UCX_TLS") : "(unset)");
          return ncclRemoteError;
        }
        *ready = true;
        return ncclSuccess;
      }
      default:
        return ncclInternalError;
    }
  }
  if (err != EAGAIN) {
    UCX_WARN("connect() to %s: %s while %s; %s", c->peer.c_str(), ioError(err).c_str(), stepName(hs.step),
             err == ECONNREFUSED || err == kEof ? "the receiver closed its listen (before accepting) or exited"
                                                : "the receiving process may have exited: look at its log");
    return ncclRemoteError;
  }
  if (Clock::now() > hs.deadline) {
    UCX_WARN(
        "connect() to %s: the handshake did not finish within %g s (stopped while %s); the receiver has not "
        "called accept() or is stuck; raise PLEXUS_UCX_CONNECT_TIMEOUT if it is only slow",
        c->peer.c_str(), knobs().connectTimeoutS, stepName(hs.step));
    return ncclRemoteError;
  }
  return ncclSuccess;
}

enum class Outcome { Pending, Ready, Dropped, Failed };

// The receiver's side of one accepted socket.
Outcome advanceAccept(ListenComm* l, RecvComm* r) {
  Handshake& hs = *r->hs;
  int err = 0;
  while (err == 0) {
    switch (hs.step) {
      case Step::RecvHello: {
        err = socketRecv(r->sock, &hs.hello, sizeof(hs.hello), &hs.done);
        if (err != 0) break;
        if (hs.hello.magic != kHelloMagic || hs.hello.version != kProtocolVersion) {
          UCX_WARN(
              "accept() on %s: dropped a connection from %s that is no net-ucx sender of protocol version %u "
              "(magic 0x%08x, version %u)",
              l->name.c_str(), r->peer.c_str(), kProtocolVersion, hs.hello.magic, hs.hello.version);
          return Outcome::Dropped;
        }
        if (hs.hello.nonce != l->nonce) {
          UCX_WARN(
              "accept() on %s: refused %s, which came with the handle of another listen (closed; its port is "
              "now this one's)",
              l->name.c_str(), r->peer.c_str());
          Welcome no{kWelcomeMagic, kUnknownListen, 0, 0};
          size_t sent = 0;
          socketSend(r->sock, &no, sizeof(no), &sent);  // best effort: the sender then knows why
          return Outcome::Dropped;
        }
        hs.vouched = true;
        const std::vector<uint8_t>& address = r->worker->address();
        {
          std::lock_guard<std::mutex> lock(r->worker->mutex());
          r->connId = r->worker->newConnId();
        }
        Welcome w{kWelcomeMagic, kAccepted, r->connId, static_cast<uint32_t>(address.size())};
        hs.bytes.resize(sizeof(w) + address.size());
        memcpy(hs.bytes.data(), &w, sizeof(w));
        memcpy(hs.bytes.data() + sizeof(w), address.data(), address.size());
        hs.step = Step::SendWelcome, hs.done = 0;
        break;
      }
      case Step::SendWelcome:
        err = socketSend(r->sock, hs.bytes.data(), hs.bytes.size(), &hs.done);
        if (err != 0) break;
        if (r->startConfirm() != ncclSuccess) return Outcome::Failed;
        hs.step = Step::Confirm;
        break;
      case Step::Confirm: {
        ucs_status_t status = r->pollConfirm();
        if (status == UCS_INPROGRESS) {
          err = socketPeerClosed(r->sock) ? kEof : EAGAIN;
          break;
        }
        if (status != UCS_OK) {
          UCX_WARN("accept() on %s: the first message from %s over UCX failed: %s", l->name.c_str(), r->peer.c_str(),
                   ucs_status_string(status));
          return Outcome::Failed;
        }
        return Outcome::Ready;
      }
      default:
        return Outcome::Failed;
    }
  }
  if (err != EAGAIN) {
    if (!hs.vouched) {
      UCX_INFO(NCCL_NET, "accept() on %s: a connection from %s ended before its hello (%s); ignored", l->name.c_str(),
               r->peer.c_str(), ioError(err).c_str());
      return Outcome::Dropped;
    }
    UCX_WARN("accept() on %s: the sender at %s went away while %s (%s); look at the sender's log", l->name.c_str(),
             r->peer.c_str(), stepName(hs.step), ioError(err).c_str());
    return Outcome::Failed;
  }
  if (Clock::now() > hs.deadline) {
    UCX_WARN("accept() on %s: the handshake with %s did not finish within %g s (stopped while %s); %s", l->name.c_str(),
             r->peer.c_str(), knobs().connectTimeoutS, stepName(hs.step),
             hs.vouched ? "the sender is stuck or gone: look at its log" : "dropped it (not a sender of ours)");
    return hs.vouched ? Outcome::Failed : Outcome::Dropped;
  }
  return Outcome::Pending;
}

}  // namespace

// ---- Entry points --------------------------------------------------------------------------------

ncclResult_t ctxCreate(uint64_t commId, void** ctx) {
  *ctx = new Context(commId);
  return ncclSuccess;
}

ncclResult_t ctxDestroy(void* ctx) {
  Context* c = asContext(ctx);
  if (!c) {
    UCX_WARN("finalize(): %p is not a context from init() (finalized twice?)", ctx);
    return ncclInvalidArgument;
  }
  delete c;  // comms still open keep their workers
  return ncclSuccess;
}

ncclResult_t listen(void* ctx, int dev, void* handle, void** listenComm) {
  Context* c = asContext(ctx);
  if (!c || !handle || !listenComm) {
    UCX_WARN("listen(): %s", !c ? "the context is not one from init()" : "handle or listenComm is NULL");
    return ncclInvalidArgument;
  }
  *listenComm = nullptr;
  if (!validDevice(dev, "listen")) return ncclInvalidArgument;
  const Device& d = devices()[dev];
  if (d.addr.sa.sa_family != AF_INET && d.addr.sa.sa_family != AF_INET6) {
    UCX_WARN("listen() on %s: no interface of this host has an IP address to listen on; bring one up", d.name.c_str());
    return ncclSystemError;
  }
  std::shared_ptr<Worker> worker;
  {
    std::lock_guard<std::mutex> lock(c->mutex);
    if (ncclResult_t res = c->worker(dev, &worker); res != ncclSuccess) return res;
  }
  Socket sock;
  SockAddr bound{};
  if (int err = socketListen(d.addr, &sock, &bound); err != 0) {
    UCX_WARN("listen() on %s: cannot listen on %s: %s; check the interface (%s) and the open-file limit",
             d.name.c_str(), sockName(d.addr).c_str(), strerror(err), d.addrSource.c_str());
    return ncclSystemError;
  }
  auto l = std::make_unique<ListenComm>(std::move(worker), std::move(sock), randomNonce(), sockName(bound));
  Handle h{};
  h.magic = kHandleMagic;
  h.version = kProtocolVersion;
  h.nonce = l->nonce;
  h.addr = bound;
  memcpy(handle, &h, sizeof(h));
  UCX_INFO(NCCL_NET, "listening on %s (device %s)", l->name.c_str(), d.name.c_str());
  *listenComm = static_cast<Comm*>(l.release());
  return ncclSuccess;
}

ncclResult_t connect(void* ctx, int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v12_t** sendDevComm) {
  (void)sendDevComm;  // a host device: no device handle
  Context* c = asContext(ctx);
  if (!c || !handle || !sendComm) {
    UCX_WARN("connect(): %s", !c ? "the context is not one from init()" : "handle or sendComm is NULL");
    return ncclInvalidArgument;
  }
  *sendComm = nullptr;
  if (!validDevice(dev, "connect")) return ncclInvalidArgument;
  Handle h{};
  memcpy(&h, handle, sizeof(h));
  if (h.magic != kHandleMagic || h.version != kProtocolVersion || !sockValid(h.addr)) {
    UCX_WARN(
        "connect(): the handle is not one that listen() of this UCX plugin wrote (magic 0x%08x, version %u); "
        "carry listen()'s %d bytes to connect() unchanged, with the same plugin on both sides",
        h.magic, h.version, NCCL_NET_HANDLE_MAXSIZE);
    return ncclInvalidArgument;
  }

  // An attempt lives in the context between calls, found again by the handle's contents.
  std::lock_guard<std::mutex> lock(c->mutex);
  std::string key(reinterpret_cast<const char*>(&h), sizeof(h));
  key += "/" + std::to_string(dev);
  auto it = c->connecting.find(key);
  if (it == c->connecting.end()) {
    std::shared_ptr<Worker> worker;
    if (ncclResult_t res = c->worker(dev, &worker); res != ncclSuccess) return res;
    Socket sock;
    if (int err = socketConnect(h.addr, &sock); err != 0) {
      UCX_WARN("connect() to %s: %s; check that this address is reachable from here", sockName(h.addr).c_str(),
               strerror(err));
      return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM ? ncclSystemError : ncclRemoteError;
    }
    auto s = std::make_unique<SendComm>(std::move(worker), std::move(sock), sockName(h.addr));
    s->hs = std::make_unique<Handshake>(Step::Connect);
    s->hs->hello = Hello{kHelloMagic, kProtocolVersion, 0, h.nonce};
    it = c->connecting.emplace(key, std::move(s)).first;
  }
  SendComm* s = it->second.get();
  bool ready = false;
  if (ncclResult_t res = advanceConnect(s, &ready); res != ncclSuccess) {
    c->connecting.erase(it);
    return res;
  }
  {
    std::lock_guard<std::mutex> wlock(s->worker->mutex());
    s->worker->progress();
  }
  if (ready) {
    s->hs.reset();
    UCX_INFO(NCCL_NET, "connected to %s (connection %u, device %s)", s->peer.c_str(), s->connId,
             devices()[dev].name.c_str());
    *sendComm = static_cast<Comm*>(it->second.release());
    c->connecting.erase(it);
  }
  return ncclSuccess;
}

ncclResult_t accept(void* listenComm, void** recvComm, ncclNetDeviceHandle_v12_t** recvDevComm) {
  (void)recvDevComm;
  auto* l = as<ListenComm>(listenComm, Kind::Listen);
  if (!l || !recvComm) {
    UCX_WARN("accept(): %s", !l ? "the comm is not a listen comm from listen()" : "recvComm is NULL");
    return ncclInvalidArgument;
  }
  *recvComm = nullptr;
  for (int i = 0; i < 64; i++) {  // what connected since the last call
    Socket s;
    SockAddr peer{};
    int err = socketAccept(l->sock, &s, &peer);
    if (err == EAGAIN) break;
    if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
      UCX_WARN("accept() on %s: %s; raise the open-file limit (ulimit -n)", l->name.c_str(), strerror(err));
      return ncclSystemError;
    }
    if (err != 0) continue;  // a connection that died in the backlog (ECONNABORTED): its sender will retry or fail
    auto r = std::make_unique<RecvComm>(l->worker, std::move(s), sockName(peer));
    r->hs = std::make_unique<Handshake>(Step::RecvHello);
    l->pending.push_back(std::move(r));
  }
  ncclResult_t res = ncclSuccess;
  for (auto it = l->pending.begin(); it != l->pending.end();) {
    Outcome o = advanceAccept(l, it->get());
    if (o == Outcome::Pending) {
      ++it;
      continue;
    }
    if (o == Outcome::Ready) {
      RecvComm* r = it->get();
      r->hs.reset();
      UCX_INFO(NCCL_NET, "accepted %s on %s (connection %u)", r->peer.c_str(), l->name.c_str(), r->connId);
      *recvComm = static_cast<Comm*>(it->release());
      l->pending.erase(it);
      break;
    }
    it = l->pending.erase(it);
    if (o == Outcome::Failed) {
      res = ncclRemoteError;
      break;
    }
  }
  std::lock_guard<std::mutex> lock(l->worker->mutex());
  l->worker->progress();
  return res;
}

ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  auto* c = static_cast<Comm*>(comm);
  if (!c || (c->kind != Kind::Send && c->kind != Kind::Recv) || !mhandle || (!data && size)) {
    UCX_WARN("regMr(): %s", !mhandle          ? "mhandle is NULL"
                            : (!data && size) ? "data is NULL"
                                              : "the comm is not a send or receive comm");
    return ncclInvalidArgument;
  }
  bool cuda = type == NCCL_PTR_CUDA && ucxSupportsCuda();
  if (type != NCCL_PTR_HOST && !cuda) {
    UCX_WARN(
        "regMr(): memory of type %d is not supported: this plugin reports ptrSupport 0x%x "
        "(NCCL_PTR_HOST%s)",
        type, NCCL_PTR_HOST | (ucxSupportsCuda() ? NCCL_PTR_CUDA : 0), ucxSupportsCuda() ? "|NCCL_PTR_CUDA" : "");
    return ncclInvalidArgument;
  }
  auto mr = std::make_unique<MemRegion>();
  mr->base = reinterpret_cast<uintptr_t>(data);
  mr->size = size;
  mr->worker = c->worker;
  if (size > 0 && knobs().registerMemory) {
    ucp_mem_map_params_t p{};
    p.field_mask =
        UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
    p.address = data;
    p.length = size;
    p.memory_type = cuda ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
    std::lock_guard<std::mutex> lock(c->worker->mutex());
    if (ucs_status_t status = ucp_mem_map(c->worker->context(), &p, &mr->memh); status != UCS_OK) {
      UCX_WARN(
          "regMr(): UCX could not register %zu bytes at %p: %s; PLEXUS_UCX_REGISTER=0 leaves registration to "
          "UCX's cache",
          size, data, ucs_status_string(status));
      return ncclSystemError;
    }
  }
  *mhandle = mr.release();
  return ncclSuccess;
}

ncclResult_t deregMr(void* comm, void* mhandle) {
  (void)comm;  // the region remembers its worker: it may outlive the comm
  auto* mr = static_cast<MemRegion*>(mhandle);
  if (!mr || mr->magic != kRegionMagic) {
    UCX_WARN("deregMr(): %p is not a handle from regMr() (deregistered twice?)", mhandle);
    return ncclInvalidArgument;
  }
  if (mr->memh) {
    std::lock_guard<std::mutex> lock(mr->worker->mutex());
    ucp_mem_unmap(mr->worker->context(), mr->memh);
  }
  mr->magic = 0;
  delete mr;
  return ncclSuccess;
}

ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request) {
  (void)phandle;  // no profiler events
  auto* c = as<SendComm>(sendComm, Kind::Send);
  if (!c || !request || (!data && size)) {
    UCX_WARN("isend(): %s", !c         ? "the comm is not a send comm from connect()"
                            : !request ? "request is NULL"
                                       : "data is NULL");
    return ncclInvalidArgument;
  }
  *request = nullptr;
  if (size > static_cast<size_t>(INT_MAX)) {
    UCX_WARN("isend() of %zu bytes: test() reports sizes as int; split sends at maxP2pBytes (%ld)", size,
             static_cast<long>(MAX_NET_SIZE));
    return ncclInvalidArgument;
  }
  std::lock_guard<std::mutex> lock(c->worker->mutex());
  if (c->failed != ncclSuccess) return c->failed;
  c->pollPeer(Clock::now());
  if (c->peerGone) {
    UCX_WARN(
        "isend() to %s: the receiver closed the connection or exited: nothing sent now can arrive; look at "
        "the receiver's log",
        c->peer.c_str());
    return c->failed = ncclRemoteError;
  }
  Request* r = c->take(Op::Send, 1);
  if (!r) return ncclSuccess;  // NCCL_NET_MAX_REQUESTS x maxRecvs in flight: try again later
  Sub& s = r->subs[0];
  s.size = size;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.send = onSent;
  p.user_data = &s;
  useRegion(&p, mhandle, data, size, *c->worker);
  ucs_status_ptr_t st = ucp_tag_send_nbx(c->ep, data, size, tagOf(c->connId, tag), &p);
  if (UCS_PTR_IS_ERR(st)) {
    c->give(r);
    ucs_status_t status = UCS_PTR_STATUS(st);
    UCX_WARN("isend() of %zu bytes to %s: UCX refused it: %s", size, c->peer.c_str(), ucs_status_string(status));
    // A refused send means a broken endpoint (the peer is gone), unless UCX ran out of something here.
    if (status == UCS_ERR_NO_MEMORY || status == UCS_ERR_NO_RESOURCE) return ncclSystemError;
    return c->failed = ncclRemoteError;
  }
  if (st == nullptr)
    complete(&s, UCS_OK);  // went out at once (eager)
  else if (!s.done)
    s.ucx = st;
  *request = r;
  return ncclSuccess;
}

ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                   void** request) {
  (void)phandles;
  auto* c = as<RecvComm>(recvComm, Kind::Recv);
  if (!c || !request || n < 1 || n > kMaxRecvs || !data || !sizes || !tags) {
    UCX_WARN("irecv(): %s", !c                         ? "the comm is not a receive comm from accept()"
                            : (n < 1 || n > kMaxRecvs) ? "n must be 1..8 (maxRecvs)"
                                                       : "request, data, sizes or tags is NULL");
    return ncclInvalidArgument;
  }
  *request = nullptr;  // NCCL may have put NCCL_NET_OPTIONAL_RECV_COMPLETION there: we always complete
  std::lock_guard<std::mutex> lock(c->worker->mutex());
  if (c->failed != ncclSuccess) return c->failed;
  Request* r = c->take(Op::Recv, n);
  if (!r) return ncclSuccess;
  // One buffer takes the connection's next message whatever its tag; several are told apart by tag.
  uint64_t mask = n == 1 ? kConnTagMask : kFullTagMask;
  for (int i = 0; i < n; i++) {
    Sub& s = r->subs[i];
    s.size = sizes[i];
    ucp_request_param_t p{};
    // UCX 1.13 leaves recv_info unset when a receive completes at once: have every completion go
    // through the callback, which gets the size and tag.
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    p.cb.recv = onReceived;
    p.user_data = &s;
    useRegion(&p, mhandles ? mhandles[i] : nullptr, data[i], sizes[i], *c->worker);
    ucs_status_ptr_t st = ucp_tag_recv_nbx(c->worker->get(), data[i], sizes[i], tagOf(c->connId, tags[i]), mask, &p);
    if (UCS_PTR_IS_ERR(st)) {
      // Buffers already posted stay with the (never returned) request until close: the comm is unusable now.
      ucs_status_t status = UCS_PTR_STATUS(st);
      UCX_WARN("irecv() from %s: UCX refused receive %d of %d (%zu bytes): %s", c->peer.c_str(), i, n, sizes[i],
               ucs_status_string(status));
      return c->failed = ncclSystemError;
    }
    if (!st && !s.done) {  // NO_IMM_CMPL promises a request or the callback: anything else is a UCX bug
      UCX_WARN("irecv() from %s: UCX completed a receive without reporting its size", c->peer.c_str());
      return c->failed = ncclInternalError;
    }
    if (!s.done) s.ucx = st;  // the callback may have run already (a message that was here)
  }
  *request = r;
  return ncclSuccess;
}

ncclResult_t iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) {
  (void)n, (void)data, (void)sizes, (void)mhandles;
  if (!as<RecvComm>(recvComm, Kind::Recv) || !request) {
    UCX_WARN("iflush(): %s", !request ? "request is NULL" : "the comm is not a receive comm from accept()");
    return ncclInvalidArgument;
  }
  // A receive completes once its data is in place (host memory, or GPU memory copied by UCX itself):
  // there is nothing to flush. The request is done at its first test.
  *request = &gFlushDone;
  return ncclSuccess;
}

ncclResult_t test(void* request, int* done, int* sizes) {
  if (!done) {
    UCX_WARN("test(): done is NULL");
    return ncclInvalidArgument;
  }
  *done = 0;
  if (request == &gFlushDone) {
    *done = 1;
    return ncclSuccess;
  }
  auto* r = static_cast<Request*>(request);
  if (!r || r->magic != kRequestLive) {
    UCX_WARN("test(): %p is not a request in flight (a request is freed once test() reports it done)", request);
    return ncclInvalidArgument;
  }
  DataComm* c = r->comm;
  std::lock_guard<std::mutex> lock(c->worker->mutex());
  if (r->pending > 0) c->worker->progress();
  if (r->pending == 0) return c->finish(r, done, sizes);
  return c->stalled(r);
}

// The three closes: NULL is a no-op, anything but a live comm of the kind is refused (closed twice?).
template <typename T>
ncclResult_t closeAs(void* comm, Kind kind, const char* api, const char* what) {
  if (!comm) return ncclSuccess;
  T* c = as<T>(comm, kind);
  if (!c) {
    UCX_WARN("%s(): %p is not a %s comm (closed twice?)", api, comm, what);
    return ncclInvalidArgument;
  }
  delete c;
  return ncclSuccess;
}

ncclResult_t closeSend(void* sendComm) { return closeAs<SendComm>(sendComm, Kind::Send, "closeSend", "send"); }
ncclResult_t closeRecv(void* recvComm) { return closeAs<RecvComm>(recvComm, Kind::Recv, "closeRecv", "receive"); }
ncclResult_t closeListen(void* listenComm) {
  return closeAs<ListenComm>(listenComm, Kind::Listen, "closeListen", "listen");
}

}  // namespace plexus::net_ucx
