/*
 * NCCL tuner plugin ABI v6 (NCCL 2.30, the newest): symbol "ncclTunerPlugin_v6", type
 * ncclTuner_v6_t. Byte for byte NCCL's src/include/plugin/tuner/tuner_v6.h: v5 with an optional
 * getChunkSize (NULL: keep the runtime's chunk), which may rewrite the chunk of the pair chosen;
 * the runtime clamps the answer to what the protocol's buffers take. C99.
 */
#ifndef PLEXUS_TUNER_V6_H_
#define PLEXUS_TUNER_V6_H_

#include "tuner_v5.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef ncclTunerConstants_v5_t ncclTunerConstants_v6_t;
typedef ncclNvlDomainInfo_v5_t ncclNvlDomainInfo_v6_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
                       ncclNvlDomainInfo_v6_t* nvlDomainInfo, ncclTunerConstants_v6_t* constants);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** collCostTable,
                              int numAlgo, int numProto, int regBuff, int* nChannels);
  ncclResult_t (*finalize)(void* context);
  /* Optional. algo, proto: the pair chosen (NCCL indices); *chunkSize: in, the runtime's; out, the tuner's. */
  ncclResult_t (*getChunkSize)(void* context, ncclFunc_t collType, size_t nBytes, int algo, int proto, int nChannels,
                               size_t* chunkSize);
} ncclTuner_v6_t;

#ifdef __cplusplus
} /* extern "C" */
static_assert(sizeof(ncclTuner_v6_t) == 5 * sizeof(void*), "ncclTuner_v6_t layout");
#endif

#endif /* PLEXUS_TUNER_V6_H_ */
