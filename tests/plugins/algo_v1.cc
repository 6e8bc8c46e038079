// An algorithm plugin of the frozen ABI v1 (plexus/algo_v1.h: runHost takes one work item), for the core's v1
// adapter: the SDK example's recursive doubling AllReduce (examples/algo-recursive-doubling/src/rd_allreduce.h), of
// float sums alone, behind a v1 table.
#include <plexus/algo_v1.h>

#include "rd_allreduce.h"

namespace {

ncclResult_t rdRunHostV1(plexusDevComm_v1_t* comm, int channelId, const plexusDevWork_v1_t* work) {
  plexusDevChannel_v1_t* ch = &comm->channels[channelId];
  if (work->func != ncclFuncAllReduce || work->datatype != ncclFloat32 || work->redop != plexusDevSum)
    return ncclInvalidArgument;
  rd::runAllReduce<float, plexus::dev::FuncSum<float>>(comm, ch, work);
  return ch->status == PLEXUS_CHANNEL_OK ? ncclSuccess : ch->status == PLEXUS_CHANNEL_TIMEOUT ? ncclTimeout
                                                                                              : ncclRemoteError;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const plexusAlgo_v1_t plexusAlgoPlugin_v1 = {
    PLEXUS_ALGO_V1_ABI_VERSION,
    sizeof(plexusAlgo_v1_t),
    "rd-v1",
    1u << ncclFuncAllReduce,
    (1u << PLEXUS_PROTO_SIMPLE) | (1u << PLEXUS_PROTO_LL),
    rd::rdInit,
    rd::rdBuildGraph,
    rd::rdCost,
    rdRunHostV1,
    nullptr,
    rd::rdFinalize,
};
