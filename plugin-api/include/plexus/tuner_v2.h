/*
 * NCCL tuner plugin ABI v2 (NCCL 2.21-2.22): symbol "ncclTunerPlugin_v2", type ncclTuner_v2_t.
 * Byte for byte NCCL's src/include/plugin/tuner/tuner_v2.h.
 *
 * The tuner names an algorithm and protocol (NCCL_ALGO_*, NCCL_PROTO_*, tuner_common.h) instead of
 * rewriting a cost table; the runtime forces that pair (writes 0.0 into its cell) when it can run,
 * as NCCL's v2 adapter does. Leaving them at NCCL_ALGO_UNDEF / NCCL_PROTO_UNDEF keeps the default
 * choice; *nChannels != 0 sets the channel count. C99.
 */
#ifndef PLEXUS_TUNER_V2_H_
#define PLEXUS_TUNER_V2_H_

#include "tuner_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  const char* name;
  /* Once per communicator; *context is handed back to every other call. */
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context);
  /* collNetSupport, nvlsSupport: whether those algorithms could run (always 0 in Plexus). */
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int collNetSupport, int nvlsSupport,
                              int numPipeOps, int* algorithm, int* protocol, int* nChannels);
  ncclResult_t (*destroy)(void* context);
} ncclTuner_v2_t;

#ifdef __cplusplus
} /* extern "C" */
static_assert(sizeof(ncclTuner_v2_t) == 4 * sizeof(void*), "ncclTuner_v2_t layout");
#endif

#endif /* PLEXUS_TUNER_V2_H_ */
