// The algorithm plugin ABI as the core calls it: v2's calls (plexus/algo_v2.h), over whichever version a plugin
// exports. One adapter per version (algo_vN.cc), so nothing else in the core ever sees an older table.
#pragma once

#include <plexus/algo_v2.h>

#include <memory>
#include <string>

namespace plexus {

class AlgoApi {
 public:
  AlgoApi(const char* name, uint32_t funcMask, uint32_t protoMask)
      : name(name), funcMask(funcMask), protoMask(protoMask) {}
  virtual ~AlgoApi() = default;
  const char* const name;
  const uint32_t funcMask, protoMask;

  virtual ncclResult_t init(void** ctx, const plexusAlgoTopo_v2_t* topo, ncclDebugLogger_t logger) const = 0;
  virtual ncclResult_t buildGraph(void* ctx, plexusAlgoGraph_v2_t* graph) const = 0;
  virtual ncclResult_t cost(void* ctx, ncclFunc_t func, int proto, size_t nBytes, int nChannels,
                            float* timeUs) const = 0;
  virtual ncclResult_t runHost(void* ctx, const plexusDevKernelArgs_v1_t* args, int channelId) const = 0;
  // False: the plugin has no CUDA kernels (built without CUDA, or an ABI that cannot give them).
  virtual bool hasCudaKernels() const = 0;
  virtual ncclResult_t getCudaKernel(void* ctx, const plexusDevWork_v1_t* work, void** function) const = 0;
  virtual ncclResult_t finalize(void* ctx) const = 0;
  // Where each rank sits (plexusAlgo_v2_t.setPlaces); nothing for a plugin without it.
  virtual ncclResult_t setPlaces(void*, const uint64_t*) const { return ncclSuccess; }
  // The protocols' figures (plexusAlgo_v2_t.setProtocols); nothing for a plugin without it.
  virtual ncclResult_t setProtocols(void*, const plexusAlgoProtocols_v2_t*) const { return ncclSuccess; }
};

// Adapters over the table a plugin's plexusAlgoPlugin_vN symbol points at: nullptr, with *why set, when the table
// is not acceptable (wrong abiVersion, too small, no name, a required member NULL).
std::unique_ptr<const AlgoApi> algoAdapt_v1(const void* table, std::string* why);
std::unique_ptr<const AlgoApi> algoAdapt_v2(const void* table, std::string* why);

}  // namespace plexus
