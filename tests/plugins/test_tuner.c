/* A tuner plugin for the tuner tests, built once per ABI version (TUNER_VERSION=2..6, exporting only
 * ncclTunerPlugin_v<N>) and once per defect (BAD_missing_symbol, BAD_null_getCollInfo, BAD_init_error).
 *
 * What it answers comes from PLEXUS_TEST_TUNER, read at init: "<algo>,<proto>,<channels>[,<chunk>]",
 * algo tree|ring|keep|ignoreall|fail|nonsense, proto ll|ll128|simple; default "ring,ll,2". It forces
 * (algo, proto) by writing 0.0 into its cell (v2: by naming it), sets *nChannels, and with v6 sets the
 * chunk. "keep" leaves the table alone; "ignoreall" sets every cell to IGNORE; "fail" makes getCollInfo
 * return an error; "nonsense" answers what no tuner should: an algorithm and protocol outside NCCL's
 * tables (v2), NaN and negative cells (v3+), a negative channel count. With PLEXUS_TEST_TUNER_LOG set, init and finalize append a line to that file. */
#include <plexus/tuner.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef struct {
  int algo, proto, nChannels; /* algo: NCCL_ALGO_*, or one of the modes below */
  size_t chunk;
  size_t nRanks, nNodes;
} Context;

enum { KEEP = -2, IGNORE_ALL = -3, FAIL = -4, NONSENSE = -5 };

__attribute__((unused)) static void logLine(const char* what, const Context* ctx) {
  const char* path = getenv("PLEXUS_TEST_TUNER_LOG");
  if (!path) return;
  FILE* f = fopen(path, "a");
  if (!f) return;
  fprintf(f, "%s v%d nRanks=%zu nNodes=%zu\n", what, TUNER_VERSION, ctx->nRanks, ctx->nNodes);
  fclose(f);
}

static ncclResult_t start(size_t nRanks, size_t nNodes, void** context) {
#if defined(BAD_init_error)
  (void)nRanks; (void)nNodes; (void)context;
  return ncclSystemError;
#else
  Context* ctx = (Context*)calloc(1, sizeof(Context));
  if (!ctx) return ncclSystemError;
  ctx->nRanks = nRanks;
  ctx->nNodes = nNodes;
  const char* spec = getenv("PLEXUS_TEST_TUNER");
  char algo[16] = "ring", proto[16] = "ll";
  int channels = 2;
  unsigned long long chunk = 0;
  if (spec) sscanf(spec, "%15[^,],%15[^,],%d,%llu", algo, proto, &channels, &chunk);
  ctx->algo = !strcmp(algo, "tree")        ? NCCL_ALGO_TREE
              : !strcmp(algo, "ring")      ? NCCL_ALGO_RING
              : !strcmp(algo, "ignoreall") ? IGNORE_ALL
              : !strcmp(algo, "fail")      ? FAIL
              : !strcmp(algo, "nonsense")  ? NONSENSE
                                           : KEEP;
  ctx->proto = !strcmp(proto, "ll") ? NCCL_PROTO_LL : !strcmp(proto, "ll128") ? NCCL_PROTO_LL128 : NCCL_PROTO_SIMPLE;
  ctx->nChannels = channels;
  ctx->chunk = (size_t)chunk;
  logLine("init", ctx);
  *context = ctx;
  return ncclSuccess;
#endif
}

static ncclResult_t stop(void* context) {
  logLine("finalize", (Context*)context);
  free(context);
  return ncclSuccess;
}

/* The v3+ answer, on NCCL's cost table. */
__attribute__((unused)) static ncclResult_t answer(void* context, float** collCostTable, int numAlgo, int numProto, int* nChannels) {
  Context* ctx = (Context*)context;
  float (*table)[NCCL_NUM_PROTOCOLS] = (float (*)[NCCL_NUM_PROTOCOLS])collCostTable;
  if (ctx->algo == FAIL) return ncclInternalError;
  if (ctx->algo == NONSENSE) {
    for (int a = 0; a < numAlgo; a++)
      for (int p = 0; p < numProto; p++) table[a][p] = (a + p) % 2 ? -5.0f : 0.0f / 0.0f;
    *nChannels = -7;
    return ncclSuccess;
  }
  if (ctx->algo == IGNORE_ALL)
    for (int a = 0; a < numAlgo; a++)
      for (int p = 0; p < numProto; p++) table[a][p] = NCCL_ALGO_PROTO_IGNORE;
  if (ctx->algo >= 0 && table[ctx->algo][ctx->proto] != NCCL_ALGO_PROTO_IGNORE) table[ctx->algo][ctx->proto] = 0.0f;
  if (ctx->algo != KEEP) *nChannels = ctx->nChannels;
  return ncclSuccess;
}

#if TUNER_VERSION == 2
static ncclResult_t init2(size_t nRanks, size_t nNodes, ncclDebugLogger_t log, void** context) {
  (void)log;
  return start(nRanks, nNodes, context);
}
static ncclResult_t getCollInfo2(void* context, ncclFunc_t f, size_t n, int collNet, int nvls, int pipeOps, int* algo,
                                 int* proto, int* nChannels) {
  (void)f; (void)n; (void)pipeOps;
  Context* ctx = (Context*)context;
  if (collNet || nvls) return ncclInvalidArgument; /* Plexus has neither */
  if (ctx->algo == FAIL) return ncclInternalError;
  if (ctx->algo == NONSENSE) {
    *algo = 99;
    *proto = -7;
    *nChannels = -7;
    return ncclSuccess;
  }
  if (ctx->algo >= 0) {
    *algo = ctx->algo;
    *proto = ctx->proto;
    *nChannels = ctx->nChannels;
  }
  return ncclSuccess;
}
EXPORT const ncclTuner_v2_t ncclTunerPlugin_v2 = {"test-v2", init2, getCollInfo2, stop};

#elif TUNER_VERSION == 3
static ncclResult_t init3(size_t nRanks, size_t nNodes, ncclDebugLogger_t log, void** context) {
  (void)log;
  return start(nRanks, nNodes, context);
}
static ncclResult_t getCollInfo3(void* context, ncclFunc_t f, size_t n, int pipeOps, float** table, int numAlgo,
                                 int numProto, int* nChannels) {
  (void)f; (void)n; (void)pipeOps;
  return answer(context, table, numAlgo, numProto, nChannels);
}
EXPORT const ncclTuner_v3_t ncclTunerPlugin_v3 = {"test-v3", init3, getCollInfo3, stop};

#elif TUNER_VERSION == 4
static ncclResult_t init4(size_t nRanks, size_t nNodes, ncclDebugLogger_t log, void** context) {
  (void)log;
  return start(nRanks, nNodes, context);
}
static ncclResult_t getCollInfo4(void* context, ncclFunc_t f, size_t n, int pipeOps, float** table, int numAlgo,
                                 int numProto, int regBuff, int* nChannels) {
  (void)f; (void)n; (void)pipeOps; (void)regBuff;
  return answer(context, table, numAlgo, numProto, nChannels);
}
EXPORT const ncclTuner_v4_t ncclTunerPlugin_v4 = {"test-v4", init4, getCollInfo4, stop};

#else /* 5 and 6 */
static ncclResult_t init5(void** context, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t log,
                          ncclNvlDomainInfo_v5_t* nvl, ncclTunerConstants_v5_t* constants) {
  (void)commId; (void)log;
  if (!nvl || !constants || nvl->nNvlDomains != (int)nNodes) return ncclInvalidArgument;
  return start(nRanks, nNodes, context);
}
static ncclResult_t getCollInfo5(void* context, ncclFunc_t f, size_t n, int pipeOps, float** table, int numAlgo,
                                 int numProto, int regBuff, int* nChannels) {
  (void)f; (void)n; (void)pipeOps; (void)regBuff;
  return answer(context, table, numAlgo, numProto, nChannels);
}
#if TUNER_VERSION == 5
EXPORT const ncclTuner_v5_t ncclTunerPlugin_v5 = {"test-v5", init5, getCollInfo5, stop};
#else
static ncclResult_t getChunkSize6(void* context, ncclFunc_t f, size_t n, int algo, int proto, int nChannels,
                                  size_t* chunkSize) {
  (void)f; (void)n; (void)algo; (void)proto; (void)nChannels;
  Context* ctx = (Context*)context;
  if (ctx->chunk) *chunkSize = ctx->chunk;
  return ncclSuccess;
}
#if defined(BAD_missing_symbol)
EXPORT const ncclTuner_v6_t ncclTunerPlugin_v7 = {"bad", init5, getCollInfo5, stop, getChunkSize6};
#elif defined(BAD_null_getCollInfo)
EXPORT const ncclTuner_v6_t ncclTunerPlugin_v6 = {"bad", init5, NULL, stop, getChunkSize6};
#else
EXPORT const ncclTuner_v6_t ncclTunerPlugin_v6 = {"test-v6", init5, getCollInfo5, stop, getChunkSize6};
#endif
#endif
#endif
