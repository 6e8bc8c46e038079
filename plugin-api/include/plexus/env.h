/*
 * NCCL env plugin ABI v1 (NCCL 2.28.7) and v2 (2.30.7): getEnv supplies the value of every knob the runtime reads
 * (NCCL_* and PLEXUS_*; NULL: unset). Loaded once per process from NCCL_ENV_PLUGIN (a name: as given, then
 * libnccl-env-<name>.so; a path; "none": the process environment), by default libnccl-env.so; exported as the data
 * symbol ncclEnvPlugin_v2 (or _v1). init runs once, before the first knob is read; finalize at process exit. The
 * string getEnv returns must stay valid until finalize or the next getEnv of the same name. C99.
 */
#ifndef PLEXUS_ENV_H_
#define PLEXUS_ENV_H_

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  const char* name;
  ncclResult_t (*init)(uint8_t ncclMajor, uint8_t ncclMinor, uint8_t ncclPatch, const char* suffix);
  ncclResult_t (*finalize)(void);
  const char* (*getEnv)(const char* name);
} ncclEnv_v1_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(uint8_t ncclMajor, uint8_t ncclMinor, uint8_t ncclPatch, const char* suffix,
                       ncclDebugLogger_t logFunction);
  ncclResult_t (*finalize)(void);
  const char* (*getEnv)(const char* name);
} ncclEnv_v2_t;

typedef ncclEnv_v2_t ncclEnv_t;
#define NCCL_ENV_PLUGIN_SYMBOL "ncclEnvPlugin_v2"

#ifdef __cplusplus
} /* extern "C" */
static_assert(sizeof(ncclEnv_v1_t) == 32, "ncclEnv_v1_t layout");
static_assert(sizeof(ncclEnv_v2_t) == 32, "ncclEnv_v2_t layout");
#endif

#endif /* PLEXUS_ENV_H_ */
