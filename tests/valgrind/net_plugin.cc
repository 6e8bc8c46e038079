// One net plugin's life as NCCL drives it without traffic, for valgrind's memcheck (ctest valgrind.net_ib): dlopen,
// ncclNetPlugin_v12's init of two contexts, devices, getProperties of each device, finalize, dlclose. A plugin
// with no device here (net-ib without an HCA) must come and go without an invalid access or a leak.
//   plexus-valgrind-net-plugin <plugin.so>
// Exit code 0 when every call returned ncclSuccess; it prints the device count.
#include <dlfcn.h>
#include <plexus/net.h>

#include <cstdarg>
#include <cstdio>

namespace {
void logger(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  if (level != NCCL_LOG_WARN && level != NCCL_LOG_INFO) return;
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  printf("\n");
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: plexus-valgrind-net-plugin <plugin.so>\n");
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "cannot load %s: %s\n", argv[1], dlerror());
    return 1;
  }
  auto* net = static_cast<const ncclNet_v12_t*>(dlsym(lib, "ncclNetPlugin_v12"));
  if (!net) {
    fprintf(stderr, "%s exports no ncclNetPlugin_v12\n", argv[1]);
    return 1;
  }
  ncclNetCommConfig_v12_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
  void *a = nullptr, *b = nullptr;
  int ndev = -1, bad = 0;
  bad += net->init(&a, 1, &config, logger, nullptr) != ncclSuccess;
  bad += net->init(&b, 2, &config, logger, nullptr) != ncclSuccess;
  bad += net->devices(&ndev) != ncclSuccess;
  for (int d = 0; d < ndev; d++) {
    ncclNetProperties_v12_t props;
    bad += net->getProperties(d, &props) != ncclSuccess;
  }
  bad += net->finalize(b) != ncclSuccess;
  bad += net->finalize(a) != ncclSuccess;
  dlclose(lib);
  printf("%s: %d device(s), %d call(s) failed\n", argv[1], ndev, bad);
  return bad ? 1 : 0;
}
