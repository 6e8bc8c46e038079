/*
 * NCCL tuner plugin ABI, every version (as NCCL's src/include/plugin/nccl_tuner.h): include this to
 * write a tuner against the newest version, ncclTuner_t = ncclTuner_v6_t, exported as
 * NCCL_TUNER_PLUGIN_SYMBOL. A tuner may export several versions; the runtime takes the newest it
 * finds (v6, v5, v4, v3, v2). See plugins/tuner-csv for a complete one. C99.
 */
#ifndef PLEXUS_TUNER_H_
#define PLEXUS_TUNER_H_

#include "tuner_v2.h"
#include "tuner_v3.h"
#include "tuner_v4.h"
#include "tuner_v5.h"
#include "tuner_v6.h"

typedef ncclTuner_v6_t ncclTuner_t;
typedef ncclTunerConstants_v6_t ncclTunerConstants_t;
typedef ncclNvlDomainInfo_v6_t ncclNvlDomainInfo_t;

#define NCCL_TUNER_PLUGIN_SYMBOL "ncclTunerPlugin_v6"

#endif /* PLEXUS_TUNER_H_ */
