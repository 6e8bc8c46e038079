/*
 * NCCL tuner plugin ABI v5 (NCCL 2.28-2.29): symbol "ncclTunerPlugin_v5", type ncclTuner_v5_t.
 * Byte for byte NCCL's src/include/plugin/tuner/tuner_v5.h.
 *
 * init takes the communicator's id (its hash) and NVLink domain facts, and may read and rewrite
 * NCCL's tuning constants. Plexus's cost models do not use NCCL's constants: it passes them zeroed
 * and ignores what the tuner writes there. destroy is now finalize. C99.
 */
#ifndef PLEXUS_TUNER_V5_H_
#define PLEXUS_TUNER_V5_H_

#include "tuner_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int nNvlDomains;          /* NVLink domains in the communicator (Plexus: one per node) */
  int minRanksPerNvlDomain; /* fewest ranks any domain has */
  int maxRanksPerNvlDomain; /* most ranks any domain has */
} ncclNvlDomainInfo_v5_t;

#define NCCL_NUM_ALGORITHMS_V5 7
#define NCCL_NUM_PROTOCOLS_V5 3
#define NCCL_NUM_HW_LINKS_V5 3
#define NCCL_NUM_COMPCAPS_V5 4
#define NCCL_NUM_TUNING_SCALES_V5 3

typedef struct {
  double baseLatencies[NCCL_NUM_ALGORITHMS_V5][NCCL_NUM_PROTOCOLS_V5];
  double hwLatencies[NCCL_NUM_HW_LINKS_V5][NCCL_NUM_ALGORITHMS_V5][NCCL_NUM_PROTOCOLS_V5];
  double llMaxBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxRingLL128Bws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxTreeLL128Bws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxTreeBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxNVLSTreeBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
} ncclTunerConstants_v5_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
                       ncclNvlDomainInfo_v5_t* nvlDomainInfo, ncclTunerConstants_v5_t* constants);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** collCostTable,
                              int numAlgo, int numProto, int regBuff, int* nChannels);
  ncclResult_t (*finalize)(void* context);
} ncclTuner_v5_t;

#ifdef __cplusplus
} /* extern "C" */
static_assert(sizeof(ncclNvlDomainInfo_v5_t) == 12, "ncclNvlDomainInfo_v5_t layout");
static_assert(sizeof(ncclTunerConstants_v5_t) == 1152, "ncclTunerConstants_v5_t layout");
static_assert(offsetof(ncclTunerConstants_v5_t, hwLatencies) == 168, "ncclTunerConstants_v5_t layout");
static_assert(offsetof(ncclTunerConstants_v5_t, llMaxBws) == 672, "ncclTunerConstants_v5_t layout");
static_assert(offsetof(ncclTunerConstants_v5_t, perChMaxNVLSTreeBws) == 1056, "ncclTunerConstants_v5_t layout");
static_assert(sizeof(ncclTuner_v5_t) == 4 * sizeof(void*), "ncclTuner_v5_t layout");
#endif

#endif /* PLEXUS_TUNER_V5_H_ */
