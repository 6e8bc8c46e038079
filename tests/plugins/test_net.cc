// Net plugins for the loader tests, built once per variant (tests/plugins/CMakeLists.txt):
//   - test-v6 .. test-v12 (NET_VERSION=N): export ncclNetPlugin_vN alone, through plexus/net_export.h over
//     a v12 table named "test-vN" whose members forward to libplexus's built-in socket net
//     (plexusSocketNet_v12, found with dlsym(RTLD_DEFAULT) at init), so that each ABI version carries
//     real traffic; outside a process that loaded libplexus, init fails with one clear line;
//   - test-nulloptional: v12 with every optional member NULL (regMrDmaBuf, getDeviceMr, irecvConsumed,
//     makeVDevice, setNetAttr), otherwise working;
//   - bad-nodevs (devices() gives 0), bad-init (init fails), bad-nosymbol (no ncclNetPlugin_vN at all),
//     bad-nullmember (v12 with isend NULL), bad-newer (only ncclNetPlugin_v13, a version nobody knows):
//     one defect each, which the loader must refuse or skip with one clear line.
// Each also exports a hook for tests in the process that loaded it (plexusTestNetWatch/plexusTestNetWatched):
// the bytes that isend and irecv were handed inside one buffer, which shows whether the runtime gave the plugin
// the application's memory or its own staging slots.
#include <dlfcn.h>
#include <plexus/net.h>

#include <atomic>
#include <cstdint>
#include <cstdio>

#ifndef NET_VERSION
#error "NET_VERSION (6..12) selects the ABI version the plugin exports"
#endif

// Each variant leaves some forwarders out of its table.
#pragma GCC diagnostic ignored "-Wunused-function"

#define STR2(x) #x
#define STR(x) STR2(x)

#if defined(BAD_nodevs)
#define TABLE_NAME "bad-nodevs"
#elif defined(BAD_init)
#define TABLE_NAME "bad-init"
#elif defined(BAD_nosymbol)
#define TABLE_NAME "bad-nosymbol"
#elif defined(BAD_nullmember)
#define TABLE_NAME "bad-nullmember"
#elif defined(BAD_newer)
#define TABLE_NAME "bad-newer"
#elif defined(NULL_OPTIONAL)
#define TABLE_NAME "test-nulloptional"
#else
#define TABLE_NAME "test-v" STR(NET_VERSION)
#endif

namespace {

const ncclNet_v12_t* socketNet = nullptr;  // libplexus's, set by the first init

#define LOG(logger, level, ...)                                             \
  do {                                                                      \
    if (logger)                                                             \
      logger(level, NCCL_NET | NCCL_INIT, __FILE__, __LINE__, __VA_ARGS__); \
    else                                                                    \
      fprintf(stderr, TABLE_NAME ": " __VA_ARGS__), fputc('\n', stderr);    \
  } while (0)

ncclResult_t netInit(void** ctx, uint64_t commId, ncclNetCommConfig_v12_t* config, ncclDebugLogger_t logger,
                     ncclProfilerCallback_t prof) {
#if defined(BAD_init)
  (void)ctx, (void)commId, (void)config, (void)prof;
  LOG(logger, NCCL_LOG_WARN, "net plugin " TABLE_NAME ": init fails on purpose (a loader test)");
  return ncclSystemError;
#else
  if (!socketNet) {
    socketNet = (const ncclNet_v12_t*)dlsym(RTLD_DEFAULT, "plexusSocketNet_v12");
    if (!socketNet) {
      LOG(logger, NCCL_LOG_WARN,
          "net plugin " TABLE_NAME
          ": plexusSocketNet_v12 not found (%s). This test plugin forwards to "
          "libplexus's socket net and works only in a process that loaded libplexus",
          dlerror());
      return ncclSystemError;
    }
  }
  return socketNet->init(ctx, commId, config, logger, prof);
#endif
}

// Every other member is called after a successful init, so socketNet is set.
ncclResult_t netDevices(int* ndev) {
#if defined(BAD_nodevs)
  *ndev = 0;
  return ncclSuccess;
#else
  return socketNet->devices(ndev);
#endif
}
ncclResult_t netGetProperties(int dev, ncclNetProperties_v12_t* props) { return socketNet->getProperties(dev, props); }
ncclResult_t netListen(void* ctx, int dev, void* handle, void** listenComm) {
  return socketNet->listen(ctx, dev, handle, listenComm);
}
ncclResult_t netConnect(void* ctx, int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v12_t** devComm) {
  return socketNet->connect(ctx, dev, handle, sendComm, devComm);
}
ncclResult_t netAccept(void* listenComm, void** recvComm, ncclNetDeviceHandle_v12_t** devComm) {
  return socketNet->accept(listenComm, recvComm, devComm);
}
ncclResult_t netRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  return socketNet->regMr(comm, data, size, type, mhandle);
}
ncclResult_t netRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle) {
  return socketNet->regMrDmaBuf(comm, data, size, type, offset, fd, mhandle);
}
ncclResult_t netDeregMr(void* comm, void* mhandle) { return socketNet->deregMr(comm, mhandle); }
// The buffer watched, and the bytes posted inside it (the proxy's threads post; the test reads between operations).
std::atomic<uintptr_t> watchLo{0}, watchHi{0};
std::atomic<uint64_t> watchSent{0}, watchReceived{0};
void watch(const void* data, size_t size, std::atomic<uint64_t>& into) {
  const uintptr_t p = (uintptr_t)data;
  if (size && p >= watchLo.load() && p + size <= watchHi.load()) into.fetch_add(size);
}
ncclResult_t netIsend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request) {
  ncclResult_t r = socketNet->isend(sendComm, data, size, tag, mhandle, phandle, request);
  if (r == ncclSuccess && *request) watch(data, size, watchSent);
  return r;
}
ncclResult_t netIrecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                      void** request) {
  ncclResult_t r = socketNet->irecv(recvComm, n, data, sizes, tags, mhandles, phandles, request);
  if (r == ncclSuccess && *request)
    for (int i = 0; i < n; i++) watch(data[i], sizes[i], watchReceived);
  return r;
}
ncclResult_t netIflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) {
  return socketNet->iflush(recvComm, n, data, sizes, mhandles, request);
}
ncclResult_t netTest(void* request, int* done, int* sizes) { return socketNet->test(request, done, sizes); }
ncclResult_t netCloseSend(void* sendComm) { return socketNet->closeSend(sendComm); }
ncclResult_t netCloseRecv(void* recvComm) { return socketNet->closeRecv(recvComm); }
ncclResult_t netCloseListen(void* listenComm) { return socketNet->closeListen(listenComm); }
ncclResult_t netGetDeviceMr(void* comm, void* mhandle, void** dptrMhandle) {
  return socketNet->getDeviceMr(comm, mhandle, dptrMhandle);
}
ncclResult_t netIrecvConsumed(void* recvComm, int n, void* request) {
  return socketNet->irecvConsumed(recvComm, n, request);
}
ncclResult_t netMakeVDevice(int* d, ncclNetVDeviceProps_v12_t* props) { return socketNet->makeVDevice(d, props); }
ncclResult_t netFinalize(void* ctx) { return socketNet->finalize(ctx); }
ncclResult_t netSetNetAttr(void* ctx, ncclNetAttr_v12_t* attr) { return socketNet->setNetAttr(ctx, attr); }

#if defined(NULL_OPTIONAL)
#define OPTIONAL(member) nullptr
#else
#define OPTIONAL(member) member
#endif
#if defined(BAD_nullmember)
#define ISEND nullptr
#else
#define ISEND netIsend
#endif

#define TEST_NET_TABLE                                                                                               \
  {                                                                                                                  \
    TABLE_NAME, netInit, netDevices, netGetProperties, netListen, netConnect, netAccept, netRegMr,                   \
        OPTIONAL(netRegMrDmaBuf), netDeregMr, ISEND, netIrecv, netIflush, netTest, netCloseSend, netCloseRecv,       \
        netCloseListen, OPTIONAL(netGetDeviceMr), OPTIONAL(netIrecvConsumed), OPTIONAL(netMakeVDevice), netFinalize, \
        OPTIONAL(netSetNetAttr)                                                                                      \
  }

}  // namespace

#if defined(BAD_nosymbol)
// The table exists, but under no name a loader looks for.
__attribute__((used)) static const ncclNet_v12_t testNet = TEST_NET_TABLE;

#elif defined(BAD_newer)
// A version from the future: the loader must not guess its layout.
extern "C" {
__attribute__((visibility("default"))) extern const ncclNet_v12_t ncclNetPlugin_v13;
}
const ncclNet_v12_t ncclNetPlugin_v13 = TEST_NET_TABLE;

#elif NET_VERSION == 12
extern "C" {
__attribute__((visibility("default"))) extern const ncclNet_v12_t ncclNetPlugin_v12;
}
const ncclNet_v12_t ncclNetPlugin_v12 = TEST_NET_TABLE;

#else
static const ncclNet_v12_t testNet = TEST_NET_TABLE;
#define PLEXUS_NET_EXPORT_IMPL testNet
#include <plexus/net_export.h>
#define EXPORT_VERSION2(v) PLEXUS_NET_EXPORT_V##v
#define EXPORT_VERSION(v) EXPORT_VERSION2(v)
EXPORT_VERSION(NET_VERSION)
#endif

// The test hook (see the top): watch [p, p + size) from now on, counting from zero; read what was posted inside it.
extern "C" __attribute__((visibility("default"))) void plexusTestNetWatch(const void* p, size_t size) {
  watchLo = 0;
  watchHi = 0;
  watchSent = 0;
  watchReceived = 0;
  watchLo = (uintptr_t)p;
  watchHi = (uintptr_t)p + size;
}
extern "C" __attribute__((visibility("default"))) void plexusTestNetWatched(uint64_t* sent, uint64_t* received) {
  *sent = watchSent.load();
  *received = watchReceived.load();
}
