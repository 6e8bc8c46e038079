/*
 * NCCL profiler plugin ABI, every version (as NCCL's src/include/plugin/nccl_profiler.h): include this to write a
 * profiler against the newest version, ncclProfiler_t = ncclProfiler_v6_t, exported as the data symbol
 * NCCL_PROFILER_PLUGIN_SYMBOL. A profiler may export several versions; the runtime takes the newest it finds (v6 ..
 * v1). Loaded from NCCL_PROFILER_PLUGIN (a name: as given, then libnccl-profiler-<name>.so; a path; "none"), by
 * default libnccl-profiler.so. See plugins/profiler-trace for a complete one. C99.
 */
#ifndef PLEXUS_PROFILER_H_
#define PLEXUS_PROFILER_H_

#include "profiler_v1.h"
#include "profiler_v2.h"
#include "profiler_v3.h"
#include "profiler_v4.h"
#include "profiler_v5.h"
#include "profiler_v6.h"

typedef ncclProfiler_v6_t ncclProfiler_t;
typedef ncclProfilerEventDescr_v6_t ncclProfilerEventDescr_t;
typedef ncclProfilerEventStateArgs_v6_t ncclProfilerEventStateArgs_t;

#define NCCL_PROFILER_PLUGIN_SYMBOL "ncclProfiler_v6"

#endif /* PLEXUS_PROFILER_H_ */
