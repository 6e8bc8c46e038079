// A net plugin with one defect, chosen by NETCHECK_DEFECT, for plexus-net-check's own tests: each defect must
// be caught by its rule with a clear FAIL line, and a crash or hang must cost that rule alone. Everything else
// forwards to libplexus's built-in socket net (plexusSocketNet_v12, found with dlsym(RTLD_DEFAULT) at init).
//   hang-connect      connect never returns
//   hang-close        closeRecv never returns
//   crash-test        the 10th test call dies of SIGSEGV
//   handle-overflow   listen writes 16 bytes past NCCL_NET_HANDLE_MAXSIZE
//   wrong-size        test reports one byte more than was received
//   zero-size         isend refuses zero-byte messages
//   send-error        isend fails (ncclSystemError) every time: the runtime's operations must fail with it
//   null-forever      isend always gives a NULL request
//   max8              isend gives NULL while 8 sends are in flight (NCCL's old limit)
//   never-done        test never reports a send done
//   hang-test         the 20th test call never returns (a plugin that blocks the proxy thread)
//   false-completion  test reports done (0 bytes) where the socket net reports a dead peer
//   force-flush       claims forceFlush, so that the flush rule runs (over the socket net's iflush)
#include <dlfcn.h>
#include <plexus/net.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

// Calls blocked for ever in the plugin (hang-test): a test waits for it instead of sleeping and hoping.
extern "C" __attribute__((visibility("default"))) int defectiveBlockedCalls;
int defectiveBlockedCalls = 0;

namespace {

const ncclNet_v12_t* sock = nullptr;
std::string defect;
std::set<void*> sends, finished;  // requests of isend; sends done that never-done keeps pending

bool is(const char* d) { return defect == d; }

ncclResult_t init(void** ctx, uint64_t commId, ncclNetCommConfig_v12_t* config, ncclDebugLogger_t log,
                  ncclProfilerCallback_t prof) {
  sock = (const ncclNet_v12_t*)dlsym(RTLD_DEFAULT, "plexusSocketNet_v12");
  if (!sock) return ncclSystemError;  // outside a process with libplexus's socket net
  const char* d = getenv("NETCHECK_DEFECT");
  defect = d ? d : "";
  return sock->init(ctx, commId, config, log, prof);
}
ncclResult_t devices(int* n) { return sock->devices(n); }
ncclResult_t getProperties(int dev, ncclNetProperties_v12_t* p) {
  ncclResult_t r = sock->getProperties(dev, p);
  if (is("force-flush")) p->forceFlush = 1;
  return r;
}
ncclResult_t listen(void* ctx, int dev, void* handle, void** listenComm) {
  ncclResult_t r = sock->listen(ctx, dev, handle, listenComm);
  if (is("handle-overflow")) memset((char*)handle + NCCL_NET_HANDLE_MAXSIZE, 0x5a, 16);
  return r;
}
ncclResult_t connect(void* ctx, int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v12_t** devComm) {
  while (is("hang-connect")) pause();
  return sock->connect(ctx, dev, handle, sendComm, devComm);
}
ncclResult_t accept(void* listenComm, void** recvComm, ncclNetDeviceHandle_v12_t** devComm) {
  return sock->accept(listenComm, recvComm, devComm);
}
ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  return sock->regMr(comm, data, size, type, mhandle);
}
ncclResult_t deregMr(void* comm, void* mhandle) { return sock->deregMr(comm, mhandle); }
ncclResult_t isend(void* comm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request) {
  *request = nullptr;
  if (is("null-forever") || (is("max8") && sends.size() >= 8)) return ncclSuccess;
  if (is("zero-size") && size == 0) return ncclInvalidArgument;
  if (is("send-error")) return ncclSystemError;
  ncclResult_t r = sock->isend(comm, data, size, tag, mhandle, phandle, request);
  if (r == ncclSuccess && *request) sends.insert(*request);
  return r;
}
ncclResult_t irecv(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                   void** request) {
  return sock->irecv(comm, n, data, sizes, tags, mhandles, phandles, request);
}
ncclResult_t iflush(void* comm, int n, void** data, int* sizes, void** mhandles, void** request) {
  return sock->iflush(comm, n, data, sizes, mhandles, request);
}
ncclResult_t test(void* request, int* done, int* sizes) {
  static long calls = 0;
  if (is("crash-test") && ++calls == 10) raise(SIGSEGV);
  if (is("hang-test") && ++calls >= 20) {
    __atomic_add_fetch(&defectiveBlockedCalls, 1, __ATOMIC_SEQ_CST);
    for (;;) pause();
  }
  if (finished.count(request)) return *done = 0, ncclSuccess;
  ncclResult_t r = sock->test(request, done, sizes);
  if (r != ncclSuccess && is("false-completion")) {
    *done = 1;
    if (sizes) sizes[0] = 0;
    return ncclSuccess;
  }
  if (r != ncclSuccess || !*done) return r;
  if (sends.erase(request) && is("never-done")) return finished.insert(request), *done = 0, ncclSuccess;
  if (is("wrong-size") && sizes) sizes[0] += 1;
  return r;
}
ncclResult_t closeSend(void* comm) { return sock->closeSend(comm); }
ncclResult_t closeRecv(void* comm) {
  while (is("hang-close")) pause();
  return sock->closeRecv(comm);
}
ncclResult_t closeListen(void* comm) { return sock->closeListen(comm); }
ncclResult_t finalize(void* ctx) { return sock->finalize(ctx); }

}  // namespace

extern "C" __attribute__((visibility("default"))) const ncclNet_v12_t ncclNetPlugin_v12 = {
    "defective", init,   devices, getProperties, listen,    connect,     accept,  regMr,   nullptr, deregMr,  isend,
    irecv,       iflush, test,    closeSend,     closeRecv, closeListen, nullptr, nullptr, nullptr, finalize, nullptr};
