// tuner-csv: NCCL's example tuner plugin (NCCL 2.30 plugins/tuner/example) over Plexus's plugin API.
// Rules come from a CSV file, NCCL_TUNER_CONFIG_FILE (PLEXUS_TUNER_CONFIG_FILE wins), else
// ./nccl_tuner.conf; a missing file is no error. One rule a line:
//
//   collective,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks[,numPipeOps[,regBuff]]
//
// It decides exactly as NCCL's example does, so a file tuned for NCCL means the same here: '#' in the
// first column starts a comment; empty fields vanish (the example splits with strtok); a row needs
// 8 fields (more than 10 are not read; a shorter row is skipped with a log line); unknown names
// fall back to allreduce, ring and simple; bytes match when min <= nBytes <= max; -1 is a wildcard
// for nNodes, nRanks, numPipeOps and regBuff, and keeps the default for channels. The first
// matching row whose (algorithm, protocol) cell can run sets that cell to 0.0, which forces it, and
// *nChannels to its channels; with no such row the cost table stands and *nChannels is 1.
#include <plexus/tuner.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <string>
#include <vector>

namespace {

struct Rule {
  ncclFunc_t func;
  size_t minBytes, maxBytes;
  int algo, proto, nChannels, nNodes, nRanks, numPipeOps, regBuff;
  int line;
};

struct Context {
  size_t nRanks, nNodes;
  ncclDebugLogger_t log;
  std::string path;
  std::vector<Rule> rules;
};

#define LOG(ctx, level, ...) \
  do {                       \
    if ((ctx)->log) (ctx)->log(level, NCCL_TUNING, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

ncclFunc_t parseFunc(const std::string& s) {
  if (s == "broadcast") return ncclFuncBroadcast;
  if (s == "reduce") return ncclFuncReduce;
  if (s == "allgather") return ncclFuncAllGather;
  if (s == "reducescatter") return ncclFuncReduceScatter;
  return ncclFuncAllReduce;  // "allreduce", and anything unknown
}

const char* algoNames[NCCL_NUM_ALGORITHMS] = {"tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree",
                                              "pat"};
const char* protoNames[NCCL_NUM_PROTOCOLS] = {"ll", "ll128", "simple"};

int parseName(const std::string& s, const char* const* names, int n, int fallback) {
  for (int i = 0; i < n; i++)
    if (s == names[i]) return i;
  return fallback;
}

// The example's fields: strtok on ',' (so empty fields vanish), at most 10, trimmed of blanks.
std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < line.size() && out.size() < 10) {
    size_t comma = line.find(',', pos);
    if (comma == std::string::npos) comma = line.size();
    if (comma > pos) {
      std::string f = line.substr(pos, comma - pos);
      size_t b = f.find_first_not_of(" \t");
      size_t e = f.find_last_not_of(" \t\r");
      out.push_back(b == std::string::npos ? "" : f.substr(b, e - b + 1));
    }
    pos = comma + 1;
  }
  return out;
}

void loadRules(Context* ctx) {
  std::ifstream in(ctx->path);
  if (!in) {
    LOG(ctx, NCCL_LOG_INFO, "tuner-csv: no config file %s (NCCL_TUNER_CONFIG_FILE); the cost model decides",
        ctx->path.c_str());
    return;
  }
  std::string line;
  for (int n = 1; std::getline(in, line); n++) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f = fields(line);
    if (f.size() < 8) {
      LOG(ctx, NCCL_LOG_INFO, "tuner-csv: %s:%d skipped: %zu field(s), a rule has 8 to 10", ctx->path.c_str(), n,
          f.size());
      continue;
    }
    Rule r;
    r.func = parseFunc(f[0]);
    r.minBytes = (size_t)strtoull(f[1].c_str(), nullptr, 10);
    r.maxBytes = (size_t)strtoull(f[2].c_str(), nullptr, 10);
    r.algo = parseName(f[3], algoNames, NCCL_NUM_ALGORITHMS, NCCL_ALGO_RING);
    r.proto = parseName(f[4], protoNames, NCCL_NUM_PROTOCOLS, NCCL_PROTO_SIMPLE);
    r.nChannels = atoi(f[5].c_str());
    r.nNodes = atoi(f[6].c_str());
    r.nRanks = atoi(f[7].c_str());
    r.numPipeOps = f.size() > 8 ? atoi(f[8].c_str()) : -1;
    r.regBuff = f.size() > 9 ? atoi(f[9].c_str()) : -1;
    r.line = n;
    ctx->rules.push_back(r);
    LOG(ctx, NCCL_LOG_INFO, "tuner-csv: %s:%d: %s [%zu, %zu] -> %s/%s, channels %d, nNodes %d, nRanks %d",
        ctx->path.c_str(), n, f[0].c_str(), r.minBytes, r.maxBytes, algoNames[r.algo], protoNames[r.proto],
        r.nChannels, r.nNodes, r.nRanks);
  }
  LOG(ctx, NCCL_LOG_INFO, "tuner-csv: %zu rule(s) from %s", ctx->rules.size(), ctx->path.c_str());
}

ncclResult_t init(void** context, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t log,
                  ncclNvlDomainInfo_v6_t* nvlDomainInfo, ncclTunerConstants_v6_t* constants) {
  (void)commId;
  (void)nvlDomainInfo;
  (void)constants;
  auto* ctx = new (std::nothrow) Context{nRanks, nNodes, log, "", {}};
  if (!ctx) return ncclSystemError;
  const char* path = getenv("PLEXUS_TUNER_CONFIG_FILE");
  if (!path) path = getenv("NCCL_TUNER_CONFIG_FILE");
  ctx->path = path ? path : "nccl_tuner.conf";
  loadRules(ctx);
  *context = ctx;
  return ncclSuccess;
}

ncclResult_t getCollInfo(void* context, ncclFunc_t func, size_t nBytes, int numPipeOps, float** collCostTable,
                         int numAlgo, int numProto, int regBuff, int* nChannels) {
  auto* ctx = (Context*)context;
  if (!ctx) return ncclInternalError;
  auto table = (float (*)[NCCL_NUM_PROTOCOLS])collCostTable;
  *nChannels = 1;  // the example's default
  for (const Rule& r : ctx->rules) {
    if (r.func != func || nBytes < r.minBytes || nBytes > r.maxBytes) continue;
    if ((r.nNodes != -1 && r.nNodes != (int)ctx->nNodes) || (r.nRanks != -1 && r.nRanks != (int)ctx->nRanks) ||
        (r.numPipeOps != -1 && r.numPipeOps != numPipeOps) || (r.regBuff != -1 && r.regBuff != regBuff))
      continue;
    if (r.algo >= numAlgo || r.proto >= numProto || table[r.algo][r.proto] == NCCL_ALGO_PROTO_IGNORE) {
      LOG(ctx, NCCL_LOG_TRACE, "tuner-csv: %s:%d matches, but %s/%s cannot run here; next rule", ctx->path.c_str(),
          r.line, algoNames[r.algo], protoNames[r.proto]);
      continue;
    }
    table[r.algo][r.proto] = 0.0f;
    if (r.nChannels != -1) *nChannels = r.nChannels;
    LOG(ctx, NCCL_LOG_TRACE, "tuner-csv: %zu B: %s:%d -> %s/%s, channels %d", nBytes, ctx->path.c_str(), r.line,
        algoNames[r.algo], protoNames[r.proto], *nChannels);
    return ncclSuccess;
  }
  return ncclSuccess;
}

ncclResult_t finalize(void* context) {
  delete (Context*)context;
  return ncclSuccess;
}

}  // namespace

// Both, as NCCL's example: v6 for NCCL 2.30 and Plexus, v5 for NCCL 2.28-2.29. No getChunkSize: the
// runtime's chunk stands.
extern "C" __attribute__((visibility("default"))) const ncclTuner_v6_t ncclTunerPlugin_v6 = {
    "csv", init, getCollInfo, finalize, nullptr};
extern "C" __attribute__((visibility("default"))) const ncclTuner_v5_t ncclTunerPlugin_v5 = {"csv", init, getCollInfo,
                                                                                              finalize};
