// Recursive doubling AllReduce, an algorithm plugin built against the installed Plexus SDK alone
// (plexus/algo_v2.h and the shared primitives of plexus/device/); the algorithm is in rd_allreduce.h.
#include <plexus/algo_v2.h>
#include <plexus/device/kernel.h>

#include "rd_allreduce.h"

namespace {

using namespace rd;

// One work's step loop, as runLaunchHost (plexus/device/kernel.h) runs each work of a launch.
struct Runner {
  const plexusDevComm_v1_t* comm;
  plexusDevChannel_v1_t* ch;
  const plexusDevWork_v1_t* w;
  int tid, nthreads;
  bool known;
  template <typename T, typename F>
  void operator()() {
    if (w->func == ncclFuncAllReduce) runAllReduce<T, F>(comm, ch, w);
    else known = false;
  }
};

ncclResult_t rdRunHost(void*, const plexusDevKernelArgs_v1_t* args, int channelId) {
  const plexusDevWork_v1_t* unknown = nullptr;
  return runLaunchHost<Runner>(args, channelId, &unknown);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const plexusAlgo_v2_t plexusAlgoPlugin_v2 = {
    PLEXUS_ALGO_ABI_VERSION,
    sizeof(plexusAlgo_v2_t),
    "recursive-doubling",
    1u << ncclFuncAllReduce,
    (1u << PLEXUS_PROTO_SIMPLE) | (1u << PLEXUS_PROTO_LL),
    rdInit,
    rdBuildGraph,
    rdCost,
    rdRunHost,
    nullptr, /* no CUDA kernels: this example runs on the host backend */
    rdFinalize,
};
