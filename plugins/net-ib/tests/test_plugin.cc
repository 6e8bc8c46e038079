// The net-ib plugin itself, as NCCL drives it, over the stand-in libibverbs (fake_ibverbs.cc): devices and
// properties, the listen/connect/accept handshake and queue pair states, registration, every size through the
// clear-to-send FIFO and two queue pairs, a multi-receive, and a port that goes down. Sender and receiver are two
// comms of this process (the stand-in's writes go into this same process).
#include <dlfcn.h>
#include <doctest/doctest.h>
#include <plexus/net.h>

#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

std::string gLog;
void logger(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  if (level != NCCL_LOG_WARN && level != NCCL_LOG_INFO) return;
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  gLog += std::string(line) + "\n";
}

const ncclNet_v12_t* plugin() {
  static const ncclNet_v12_t* net = [] {
    setenv("PLEXUS_IB_VERBS_LIBRARY", FAKE_IBVERBS, 1);
    setenv("NCCL_IB_QPS_PER_CONNECTION", "2", 1);
    void* lib = dlopen(NET_IB_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    REQUIRE_MESSAGE(lib, dlerror());
    return static_cast<const ncclNet_v12_t*>(dlsym(lib, "ncclNetPlugin_v12"));
  }();
  return net;
}

struct Connection {
  const ncclNet_v12_t* net = plugin();
  void* ctx = nullptr;
  void *listenComm = nullptr, *sendComm = nullptr, *recvComm = nullptr;

  Connection() {
    ncclNetCommConfig_v12_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
    REQUIRE(net->init(&ctx, 1, &config, logger, nullptr) == ncclSuccess);
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    REQUIRE(net->listen(ctx, 0, handle, &listenComm) == ncclSuccess);
    // As NCCL: connect and accept called again until each hands out its comm; neither may block.
    for (int i = 0; i < 100000 && (!sendComm || !recvComm); i++) {
      if (!sendComm) REQUIRE(net->connect(ctx, 0, handle, &sendComm, nullptr) == ncclSuccess);
      if (!recvComm) REQUIRE(net->accept(listenComm, &recvComm, nullptr) == ncclSuccess);
    }
    REQUIRE(sendComm);
    REQUIRE(recvComm);
  }
  ~Connection() {
    net->closeSend(sendComm);
    net->closeRecv(recvComm);
    net->closeListen(listenComm);
    net->finalize(ctx);
  }

  // One message of `size` bytes (receive buffer `cap`); returns the size the receiver's test reported.
  int roundTrip(const std::vector<char>& src, std::vector<char>& dst, int tag = 3) {
    void *smh = nullptr, *rmh = nullptr;
    REQUIRE(net->regMr(sendComm, (void*)src.data(), src.size() + 1, NCCL_PTR_HOST, &smh) == ncclSuccess);
    REQUIRE(net->regMr(recvComm, dst.data(), dst.size(), NCCL_PTR_HOST, &rmh) == ncclSuccess);
    void* data[1] = {dst.data()};
    size_t sizes[1] = {dst.size()};
    int tags[1] = {tag};
    void* mhs[1] = {rmh};
    void *rreq = nullptr, *sreq = nullptr;
    REQUIRE(net->irecv(recvComm, 1, data, sizes, tags, mhs, nullptr, &rreq) == ncclSuccess);
    REQUIRE(rreq);
    for (int i = 0; i < 100000 && !sreq; i++)
      REQUIRE(net->isend(sendComm, (void*)src.data(), src.size(), tag, smh, nullptr, &sreq) == ncclSuccess);
    REQUIRE(sreq);
    int rdone = 0, sdone = 0, got = -1;
    for (int i = 0; i < 1000000 && !(rdone && sdone); i++) {
      if (!rdone) REQUIRE(net->test(rreq, &rdone, &got) == ncclSuccess);
      if (!sdone) REQUIRE(net->test(sreq, &sdone, nullptr) == ncclSuccess);
    }
    REQUIRE(rdone);
    REQUIRE(sdone);
    CHECK(net->deregMr(sendComm, smh) == ncclSuccess);
    CHECK(net->deregMr(recvComm, rmh) == ncclSuccess);
    return got;
  }
};

}  // namespace

TEST_CASE("net-ib plugin: one RoCE device with the HCA's properties") {
  const ncclNet_v12_t* net = plugin();
  REQUIRE(net);
  CHECK(std::string(net->name) == "IB");
  void* ctx = nullptr;
  ncclNetCommConfig_v12_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
  REQUIRE(net->init(&ctx, 1, &config, logger, nullptr) == ncclSuccess);
  int n = 0;
  REQUIRE(net->devices(&n) == ncclSuccess);
  REQUIRE(n == 1);
  ncclNetProperties_v12_t p;
  REQUIRE(net->getProperties(0, &p) == ncclSuccess);
  CHECK(std::string(p.name) == "fake_0:1");
  CHECK(p.speed == 200000);  // 4X HDR
  CHECK(p.port == 1);
  CHECK(p.guid == 0x0002c90300fa4e01ull);
  CHECK(p.ptrSupport == NCCL_PTR_HOST);  // no GPUDirect, no dmabuf on the stand-in
  CHECK(p.maxRecvs == 8);
  CHECK(p.regIsGlobal == 1);
  CHECK(gLog.find("device 0: fake_0:1, RoCE, 200000 Mb/s, MTU 4096, GID index 1") != std::string::npos);
  CHECK(net->getProperties(1, &p) == ncclInvalidArgument);
  net->finalize(ctx);
}

TEST_CASE("net-ib plugin: the handshake, then messages of every size over two queue pairs, whole and in order") {
  Connection c;
  for (size_t size : {(size_t)0, (size_t)1, (size_t)4095, (size_t)65536, (size_t)(3 << 20) + 17}) {
    CAPTURE(size);
    std::vector<char> src(size + 1), dst(size + 4096, 0x5a);
    for (size_t i = 0; i < src.size(); i++) src[i] = (char)(i * 7 + size);
    CHECK(c.roundTrip(src, dst) == (int)src.size());
    CHECK(std::equal(src.begin(), src.end(), dst.begin()));
    CHECK(dst[src.size()] == 0x5a);
  }
}

TEST_CASE("net-ib plugin: a multi-receive of three buffers matched by tag") {
  Connection c;
  const ncclNet_v12_t* net = c.net;
  std::vector<char> dst[3], src[3];
  void *data[3], *rmh[3], *smh[3];
  size_t sizes[3];
  int tags[3] = {5, 6, 7};
  for (int i = 0; i < 3; i++) {
    dst[i].assign(100000, 0);
    src[i].assign(1000 + 30000 * i, (char)('a' + i));
    data[i] = dst[i].data();
    sizes[i] = dst[i].size();
    REQUIRE(net->regMr(c.recvComm, dst[i].data(), dst[i].size(), NCCL_PTR_HOST, &rmh[i]) == ncclSuccess);
    REQUIRE(net->regMr(c.sendComm, src[i].data(), src[i].size(), NCCL_PTR_HOST, &smh[i]) == ncclSuccess);
  }
  void* rreq = nullptr;
  REQUIRE(net->irecv(c.recvComm, 3, data, sizes, tags, rmh, nullptr, &rreq) == ncclSuccess);
  void* sreq[3] = {};
  for (int i : {1, 2, 0})
    for (int k = 0; k < 100000 && !sreq[i]; k++)
      REQUIRE(net->isend(c.sendComm, src[i].data(), src[i].size(), tags[i], smh[i], nullptr, &sreq[i]) == ncclSuccess);
  int done = 0, got[3] = {};
  for (int k = 0; k < 1000000 && !done; k++) REQUIRE(net->test(rreq, &done, got) == ncclSuccess);
  REQUIRE(done);
  for (int i = 0; i < 3; i++) {
    CHECK(got[i] == (int)src[i].size());
    CHECK(std::equal(src[i].begin(), src[i].end(), dst[i].begin()));
    int sdone = 0;
    for (int k = 0; k < 1000000 && !sdone; k++) REQUIRE(net->test(sreq[i], &sdone, nullptr) == ncclSuccess);
    net->deregMr(c.recvComm, rmh[i]);
    net->deregMr(c.sendComm, smh[i]);
  }
}

TEST_CASE("net-ib plugin: a port that goes down fails the next call with the device and port named") {
  Connection c;
  std::vector<char> src(100, 1), dst(100);
  CHECK(c.roundTrip(src, dst) == 100);
  void* fake = dlopen(FAKE_IBVERBS, RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(fake);
  void* hook = dlsym(fake, "plexusFakeIbvPortError");
  REQUIRE(hook);
  reinterpret_cast<void (*)(int)>(hook)(1);
  // The event thread marks the device; the next post fails (bounded: the thread may take a moment).
  ncclResult_t r = ncclSuccess;
  void* mh = nullptr;
  REQUIRE(c.net->regMr(c.recvComm, dst.data(), dst.size(), NCCL_PTR_HOST, &mh) == ncclSuccess);
  void* data[1] = {dst.data()};
  size_t sizes[1] = {dst.size()};
  int tags[1] = {0};
  for (int i = 0; i < 2000000 && r == ncclSuccess; i++) {
    void* req = nullptr;
    r = c.net->irecv(c.recvComm, 1, data, sizes, tags, &mh, nullptr, &req);
    if (req) {
      int done = 0;
      c.net->test(req, &done, nullptr);
    }
  }
  CHECK(r == ncclRemoteError);
  CHECK(gLog.find("device fake_0:1 (HCA fake_0, port 1): port 1 went down: port error") != std::string::npos);
  CHECK(c.net->deregMr(c.recvComm, mh) == ncclSuccess);
}
