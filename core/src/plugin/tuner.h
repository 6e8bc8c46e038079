// The tuner plugin ABI as the core calls it: NCCL's newest (ncclTuner_v6_t's calls), over whichever
// version a plugin exports. One adapter per version (tuner_vN.cc, as NCCL's src/plugin/tuner/), so
// nothing else in the core ever sees an older table.
#pragma once

#include <plexus/tuner.h>

#include <initializer_list>
#include <memory>
#include <string>
#include <utility>

namespace plexus {

class TunerApi {
 public:
  virtual ~TunerApi() = default;
  virtual ncclResult_t init(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t logger,
                            ncclNvlDomainInfo_v6_t* nvlDomainInfo, ncclTunerConstants_v6_t* constants) const = 0;
  // table: float[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS] (NCCL's semantics, plexus/tuner_common.h).
  virtual ncclResult_t getCollInfo(void* ctx, ncclFunc_t func, size_t nBytes, int numPipeOps, float** table,
                                   int numAlgo, int numProto, int regBuff, int* nChannels) const = 0;
  virtual ncclResult_t finalize(void* ctx) const = 0;
  // v6's optional getChunkSize; false: the runtime's chunk stands.
  virtual bool hasChunkSize() const { return false; }
  virtual ncclResult_t getChunkSize(void* ctx, ncclFunc_t func, size_t nBytes, int algo, int proto, int nChannels,
                                    size_t* chunkSize) const {
    return ncclSuccess;
  }
};

// Adapters over the table a plugin's ncclTunerPlugin_vN symbol points at. nullptr, with *why set,
// when a required member is NULL (a plugin NCCL would crash on).
std::unique_ptr<const TunerApi> tunerAdapt_v2(const void* table, std::string* why);
std::unique_ptr<const TunerApi> tunerAdapt_v3(const void* table, std::string* why);
std::unique_ptr<const TunerApi> tunerAdapt_v4(const void* table, std::string* why);
std::unique_ptr<const TunerApi> tunerAdapt_v5(const void* table, std::string* why);
std::unique_ptr<const TunerApi> tunerAdapt_v6(const void* table, std::string* why);

// "init and getCollInfo are NULL" for the members given as (name, isNull); empty when none is.
inline std::string tunerNullMembers(std::initializer_list<std::pair<const char*, bool>> members) {
  std::string names;
  int n = 0;
  for (auto& [name, isNull] : members)
    if (isNull) names += (n++ ? " and " : "") + std::string(name);
  return n ? names + (n > 1 ? " are NULL" : " is NULL") : "";
}

}  // namespace plexus
