/*
 * NCCL tuner plugin ABI v4 (NCCL 2.26-2.27): symbol "ncclTunerPlugin_v4", type ncclTuner_v4_t.
 * Byte for byte NCCL's src/include/plugin/tuner/tuner_v4.h: v3 with regBuff (whether the user
 * buffer can be registered; always 0 in Plexus) passed to getCollInfo. C99.
 */
#ifndef PLEXUS_TUNER_V4_H_
#define PLEXUS_TUNER_V4_H_

#include "tuner_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** collCostTable,
                              int numAlgo, int numProto, int regBuff, int* nChannels);
  ncclResult_t (*destroy)(void* context);
} ncclTuner_v4_t;

#ifdef __cplusplus
} /* extern "C" */
static_assert(sizeof(ncclTuner_v4_t) == 4 * sizeof(void*), "ncclTuner_v4_t layout");
#endif

#endif /* PLEXUS_TUNER_V4_H_ */
