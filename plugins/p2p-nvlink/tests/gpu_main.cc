// p2p-nvlink's CUDA paths against the real driver (ctest label gpu): the pair cases of pair.h that one GPU allows
// (several ranks on one GPU, in one process and in two; cuMem, legacy IPC, host memory, P2P read mode), and those of
// two GPUs where there are two. Exit 77 (skipped), with the reason, where no GPU is usable. The driver is
// libcuda.so.1, or PLEXUS_CUDA_DRIVER (the stand-in driver then checks this test itself).
#include <plexus/cuda/driver.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "pair.h"

using p2ptest::PairSpec;

namespace {

const char* driverPath = "libcuda.so.1";
int reasonPipe[2];

// The number of devices (at most 99), or 100 with the reason written to reasonPipe.
int probe(void*) {
  std::string why;
  plexus::cuda::Driver d;
  int n = 0;
  if (!plexus::cuda::loadDriver(driverPath, &d, &why)) {
    n = 100;
  } else if (const plexus::cuda::CUresult r = d.deviceGetCount(&n); r != plexus::cuda::CUDA_SUCCESS) {
    why = plexus::cuda::failureMessage(&d, "cuDeviceGetCount", r);
    n = 100;
  } else if (n == 0) {
    why = "the driver sees no device";
  }
  if (write(reasonPipe[1], why.data(), why.size()) < 0) n = 100;
  return n > 99 ? 100 : n;
}

}  // namespace

int main() {
  // In a child: a process that initialised CUDA must not fork, and every case forks.
  if (const char* d = getenv("PLEXUS_CUDA_DRIVER"); d && *d) driverPath = d;
  if (pipe(reasonPipe) != 0) return 1;
  const int n = p2ptest::inChild(probe, nullptr, 120);
  close(reasonPipe[1]);
  char reason[2048] = {};
  if (read(reasonPipe[0], reason, sizeof(reason) - 1) < 0) reason[0] = '\0';
  if (n <= 0 || n >= 100) {
    printf("skipped: no usable CUDA GPU here: %s\n", n < 0 ? "the driver did not answer within 120 s" : reason);
    return 77;
  }
  struct Case {
    const char* name;
    PairSpec spec;
    int gpus;
  };
  std::vector<Case> cases;
  auto add = [&](const char* name, PairSpec s, int gpus = 1) {
    s.env.insert(s.env.begin(), {"PLEXUS_P2P_READ=0", "PLEXUS_P2P_DISABLE=0", "PLEXUS_P2P_IPC=cumem"});
    cases.push_back({name, s, gpus});
  };
  PairSpec s;
  s.sameProcess = true;
  s.sameSpace = 1;
  s.ptrExchange = 1;
  add("one process, one GPU: device memory", s);
  PairSpec r = s;
  r.env.push_back("PLEXUS_P2P_READ=1");
  add("one process, one GPU, P2P read", r);
  PairSpec h = s;
  h.env.push_back("PLEXUS_P2P_DISABLE=1");
  h.sameSpace = h.ptrExchange = 0;
  add("one process, one GPU, PLEXUS_P2P_DISABLE: mapped host memory", h);
  PairSpec x;
  x.sameSpace = x.ptrExchange = 0;
  add("two processes, one GPU: cuMem", x);
  PairSpec xl = x;
  xl.env.push_back("PLEXUS_P2P_IPC=legacy");
  add("two processes, one GPU: legacy IPC", xl);
  PairSpec xh = x;
  xh.env.push_back("PLEXUS_P2P_DISABLE=1");
  add("two processes, one GPU, PLEXUS_P2P_DISABLE: registered shared memory", xh);
  PairSpec xr = x;
  xr.env.push_back("PLEXUS_P2P_READ=1");
  add("two processes, one GPU, P2P read", xr);
  PairSpec xm = x;
  xm.connections = 4;
  add("two processes, one GPU, four connections at once", xm);
  PairSpec s2 = s;
  s2.recvDevice = 1;
  s2.sameSpace = s2.ptrExchange = -1;  // direct where the GPUs reach each other, host memory otherwise
  add("one process, two GPUs", s2, 2);
  PairSpec x2 = x;
  x2.recvDevice = 1;
  add("two processes, two GPUs", x2, 2);

  int failed = 0, ran = 0;
  for (const Case& c : cases) {
    if (c.gpus > n) {
      printf("skipped  %s (needs %d GPUs, %d here)\n", c.name, c.gpus, n);
      continue;
    }
    const std::string e = p2ptest::runPair(P2P_PLUGIN, driverPath, c.spec);
    ran++;
    printf("%s %s%s%s\n", e.empty() ? "passed  " : "FAILED  ", c.name, e.empty() ? "" : ": ", e.c_str());
    failed += !e.empty();
  }
  printf("%d of %d cases passed on %d GPU(s)\n", ran - failed, ran, n);
  return failed ? 1 : 0;
}
