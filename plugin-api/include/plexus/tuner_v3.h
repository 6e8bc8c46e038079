/*
 * NCCL tuner plugin ABI v3 (NCCL 2.23-2.25): symbol "ncclTunerPlugin_v3", type ncclTuner_v3_t.
 * Byte for byte NCCL's src/include/plugin/tuner/tuner_v3.h.
 *
 * getCollInfo rewrites the cost table (tuner_common.h: 0.0 forces a cell, NCCL_ALGO_PROTO_IGNORE
 * cells cannot run) and may set *nChannels (0: keep the default). An error from getCollInfo fails
 * the operation. C99.
 */
#ifndef PLEXUS_TUNER_V3_H_
#define PLEXUS_TUNER_V3_H_

#include "tuner_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context);
  /* collCostTable: float[numAlgo][numProto] cast to float** (see tuner_common.h). */
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** collCostTable,
                              int numAlgo, int numProto, int* nChannels);
  ncclResult_t (*destroy)(void* context);
} ncclTuner_v3_t;

#ifdef __cplusplus
} /* extern "C" */
static_assert(sizeof(ncclTuner_v3_t) == 4 * sizeof(void*), "ncclTuner_v3_t layout");
#endif

#endif /* PLEXUS_TUNER_V3_H_ */
