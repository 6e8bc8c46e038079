/* Broken algorithm plugins, one defect per build (BAD_missing_symbol, BAD_wrong_version,
 * BAD_null_member), for the loader's refusal tests; BAD_bad_graph loads but builds a ring that visits rank 0
 * twice and prices large operations below small ones, for plexus-plugin-check's rules. */
#include <plexus/algo_v2.h>

#if !defined(BAD_missing_symbol)
static ncclResult_t init(void** ctx, const plexusAlgoTopo_v2_t* topo, ncclDebugLogger_t logger) {
  (void)topo; (void)logger;
  *ctx = 0;
  return ncclSuccess;
}
#if defined(BAD_bad_graph)
static ncclResult_t buildGraph(void* ctx, plexusAlgoGraph_v2_t* graph) {
  (void)ctx;
  for (int ch = 0; ch < graph->nChannels; ch++) graph->channels[ch].ringOrder[0] = 0;  /* the rest stays -1 */
  graph->connectMask = PLEXUS_ALGO_CONNECT_RING;
  return ncclSuccess;
}
static ncclResult_t cost(void* ctx, ncclFunc_t f, int p, size_t n, int c, float* t) {
  (void)ctx; (void)f; (void)p; (void)c;
  *t = 1000.0f / (float)n;
  return ncclSuccess;
}
static ncclResult_t runHost(void* ctx, const plexusDevKernelArgs_v1_t* args, int channelId) {
  (void)ctx; (void)args; (void)channelId;
  return ncclInternalError;
}
#else
static ncclResult_t buildGraph(void* ctx, plexusAlgoGraph_v2_t* graph) { (void)ctx; (void)graph; return ncclSuccess; }
static ncclResult_t cost(void* ctx, ncclFunc_t f, int p, size_t n, int c, float* t) {
  (void)ctx; (void)f; (void)p; (void)n; (void)c;
  *t = -1.0f;
  return ncclSuccess;
}
#endif
static ncclResult_t finalize(void* ctx) { (void)ctx; return ncclSuccess; }

__attribute__((visibility("default"))) const plexusAlgo_v2_t plexusAlgoPlugin_v2 = {
#if defined(BAD_wrong_version)
    PLEXUS_ALGO_ABI_VERSION + 1,
#else
    PLEXUS_ALGO_ABI_VERSION,
#endif
    sizeof(plexusAlgo_v2_t), "bad", 1u << ncclFuncAllReduce, 1u << PLEXUS_PROTO_SIMPLE, init, buildGraph, cost,
#if defined(BAD_bad_graph)
    runHost,
#else
    0 /* runHost: NULL, the defect of null_member (wrong_version is refused before this is read) */,
#endif
    0, finalize};
#else
__attribute__((visibility("default"))) int somethingElse = 1;
#endif
