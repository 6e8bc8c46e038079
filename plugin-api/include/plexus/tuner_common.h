/*
 * NCCL tuner plugin ABI: what every version (tuner_v2.h .. tuner_v6.h) shares. Values are NCCL's
 * (2.30, src/include/plugin/nccl_tuner.h), so a tuner built against NCCL's headers and one built
 * against these agree bit for bit.
 *
 * The cost table a tuner receives (v3+) is float[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS], passed
 * as float**: cast it back with (float (*)[NCCL_NUM_PROTOCOLS])table, it is one contiguous array.
 * A cell holds the estimated time in microseconds, or NCCL_ALGO_PROTO_IGNORE where the pair cannot
 * run (not loaded, not serving the collective, or filtered by NCCL_ALGO/NCCL_PROTO). After the call
 * the runtime runs the cheapest cell >= 0, so writing 0.0 into a cell forces it. C99.
 */
#ifndef PLEXUS_TUNER_COMMON_H_
#define PLEXUS_TUNER_COMMON_H_

#include "types.h"

#define NCCL_ALGO_UNDEF -1
#define NCCL_ALGO_TREE 0
#define NCCL_ALGO_RING 1
#define NCCL_ALGO_COLLNET_DIRECT 2
#define NCCL_ALGO_COLLNET_CHAIN 3
#define NCCL_ALGO_NVLS 4
#define NCCL_ALGO_NVLS_TREE 5
#define NCCL_ALGO_PAT 6
#define NCCL_NUM_ALGORITHMS 7

#define NCCL_PROTO_UNDEF -1
#define NCCL_PROTO_LL 0
#define NCCL_PROTO_LL128 1
#define NCCL_PROTO_SIMPLE 2
#define NCCL_NUM_PROTOCOLS 3

#define NCCL_TUNING_IGNORE -1.0
#define NCCL_ALGO_PROTO_IGNORE NCCL_TUNING_IGNORE

/* Indices of ncclTunerConstants_v5_t's tables (v5+). */
#define NCCL_HW_NVLINK 0
#define NCCL_HW_PCI 1
#define NCCL_HW_NET 2
#define NCCL_NUM_HW_LINKS 3
#define NCCL_VOLTA_COMPCAP_IDX 0
#define NCCL_AMPERE_COMPCAP_IDX 1
#define NCCL_HOPPER_COMPCAP_IDX 2
#define NCCL_BLACKWELL_COMPCAP_IDX 3
#define NCCL_NUM_COMPCAPS 4
#define NCCL_TUNING_SCALE_1NODE 0
#define NCCL_TUNING_SCALE_2NODES 1
#define NCCL_TUNING_SCALE_4NODES 2
#define NCCL_NUM_TUNING_SCALES 3

#endif /* PLEXUS_TUNER_COMMON_H_ */
