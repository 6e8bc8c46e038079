// plexus-info: what this installation of Plexus would do. The version, the configuration file in
// effect, every plugin file found and whether it loads (path, symbol, ABI version, or why not), the
// topology and net devices of this host, and with --tuning the decision table (algorithm, protocol,
// channels, chunk and why) for a job of any shape, from the same tuning code communicators run; with --params
// every knob (misc/params.h) with its value and where that came from.
#include <dirent.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <nccl.h>
#include <plexus.h>

#include "bootstrap/socket.h"
#include "comm/communicator.h"
#include "config/config.h"
#include "misc/debug.h"
#include "misc/env.h"
#include "misc/params.h"
#include "planner/planner.h"
#include "planner/tuning.h"
#include "plugin/loader.h"
#include "plugin/net.h"
#include "topo/hw_topo.h"
#include "topo/topo.h"

using namespace plexus;

namespace {

struct Options {
  bool tuning = false, topology = false, params = false;
  int nRanks = 0, nNodes = 1, cores = 0;
  int ranksGiven = 0;  // --nranks as given (0: not)
};

[[noreturn]] void usage(int code) {
  fprintf(code ? stderr : stdout,
          "usage: plexus-info [--tuning [--nranks N] [--nnodes M] [--cores C]] [--topology [--nranks N]] [--params]\n"
          "  (no option)   version, configuration, plugins found and loaded, topology, net devices\n"
          "  --topology    the machine as hwloc sees it (NCCL_TOPO_FILE / PLEXUS_TOPO_FILE: from that file): packages,\n"
          "                NUMA nodes, PCI switches, GPUs, NICs; then what each of N local ranks (default: one per\n"
          "                GPU, else 1) would use: its GPU, CPUs, and NICs nearest first with their path types\n"
          "  --tuning      the decision table for a job of N ranks (default: this host's cores) on M nodes\n"
          "                (default 1), each node with C cores (default: this host's)\n"
          "  --params      every knob Plexus and its plugins read (ncclParamBind's keys): value, where it came from\n"
          "                (environment, config file, env plugin, default) and meaning; [all] marks the undocumented\n"
          "                ones, which ncclParamGetAllParameterKeys lists only with NCCL_PARAM_DUMP_ALL=true\n");
  exit(code);
}

int parseCount(const char* flag, const char* v, int lo) {
  char* end = nullptr;
  long n = v ? strtol(v, &end, 10) : 0;
  if (!v || *end || n < lo || n > INT_MAX) {
    fprintf(stderr, "plexus-info: %s needs an integer >= %d, not '%s'\n", flag, lo, v ? v : "(nothing)");
    exit(2);
  }
  return (int)n;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!strcmp(a, "--tuning")) o.tuning = true;
    else if (!strcmp(a, "--topology")) o.topology = true;
    else if (!strcmp(a, "--params")) o.params = true;
    else if (!strcmp(a, "--nranks")) o.nRanks = o.ranksGiven = parseCount(a, v, 1), i++;
    else if (!strcmp(a, "--nnodes")) o.nNodes = parseCount(a, v, 1), i++;
    else if (!strcmp(a, "--cores")) o.cores = parseCount(a, v, 1), i++;
    else if (!strcmp(a, "-h") || !strcmp(a, "--help")) usage(0);
    else {
      fprintf(stderr, "plexus-info: unknown argument '%s'\n", a);
      usage(2);
    }
  }
  const int cores = (int)std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  if (!o.cores) o.cores = cores;
  if (!o.nRanks) o.nRanks = o.cores * o.nNodes;
  if (o.nNodes > o.nRanks) {
    fprintf(stderr, "plexus-info: --nnodes %d is more than --nranks %d; every node needs a rank\n", o.nNodes, o.nRanks);
    exit(2);
  }
  return o;
}

std::string bytesText(size_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (u < 4 && b >= 1024 && b % 1024 == 0) b /= 1024, u++;
  return std::to_string(b) + " " + units[u];
}

std::string funcList(uint32_t mask) {
  std::string s;
  for (int f = 0; f < ncclNumFuncs; f++)
    if (mask & (1u << f)) s += (s.empty() ? "" : ",") + std::string(funcName((ncclFunc_t)f));
  return s;
}
std::string protoList(uint32_t mask) {
  std::string s;
  for (int p = 0; p < PLEXUS_NUM_PROTOCOLS; p++)
    if (mask & (1u << p)) s += (s.empty() ? "" : ",") + std::string(protoName(p));
  return s;
}

// What one plugin file is, and whether it loads: one line.
std::string survey(const std::string& path, const std::string& file, const std::vector<std::string>& inUse) {
  auto mark = [&](const std::string& name) {
    return std::find(inUse.begin(), inUse.end(), name) != inUse.end() ? "  [in use]" : "";
  };
  if (file.rfind("libnccl-tuner", 0) == 0) {
    std::string report;
    const TunerPlugin* t = loadTuner(path, "plexus-info", &report);
    return std::string("tuner      ") + (t ? t->label : report);
  }
  // NCCL_NET_PLUGIN / NCCL_PROFILER_PLUGIN / NCCL_ENV_PLUGIN load these (in a communicator's net transport, at its
  // init, at the first knob read): only which ABI versions the file exports, and its name, are shown here.
  struct NcclKind {
    const char* filePrefix;
    const char* label;
    const char* symbolPrefix;
    std::vector<int> versions;  // newest first
  };
  static const NcclKind kinds[] = {{"libnccl-net", "net        ", "ncclNetPlugin_v", {12, 11, 10, 9, 8, 7, 6}},
                                   {"libnccl-profiler", "profiler   ", "ncclProfiler_v", {6, 5, 4, 3, 2, 1}},
                                   {"libnccl-env", "env        ", "ncclEnvPlugin_v", {2, 1}}};
  for (const NcclKind& k : kinds) {
    if (file.rfind(k.filePrefix, 0) != 0) continue;
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) return k.label + path + ": dlopen failed: " + dlerror();
    int version = 0;
    std::string found;
    const void* table = newestSymbol(lib, k.symbolPrefix, k.versions, &version, &found);
    const char* name = table ? *(const char* const*)table : nullptr;  // every one of these tables starts with its name
    return k.label + path +
           (table ? " (" + std::string(k.symbolPrefix) + std::to_string(version) + " '" + (name ? name : "?") +
                        "'; exports " + found + ")"
                  : ": refused: exports no " + std::string(k.symbolPrefix) + std::to_string(k.versions.front()) +
                        " .. _v" + std::to_string(k.versions.back()));
  }
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) return "?          " + path + ": dlopen failed: " + dlerror();
  char buf[512];
  for (int version : {PLEXUS_ALGO_ABI_VERSION, PLEXUS_ALGO_V1_ABI_VERSION}) {
    const char* symbol = version == PLEXUS_ALGO_ABI_VERSION ? PLEXUS_ALGO_PLUGIN_SYMBOL : PLEXUS_ALGO_V1_PLUGIN_SYMBOL;
    const void* table = dlsym(lib, symbol);
    if (!table) continue;
    std::string why;
    auto a = version == PLEXUS_ALGO_ABI_VERSION ? algoAdapt_v2(table, &why) : algoAdapt_v1(table, &why);
    if (!a)
      snprintf(buf, sizeof buf, "algorithm  %s: refused: symbol %s: %s", path.c_str(), symbol, why.c_str());
    else
      snprintf(buf, sizeof buf, "algorithm  %-10s %s (%s, ABI %d%s): %s; %s%s", a->name, path.c_str(), symbol, version,
               a->hasCudaKernels() ? ", CUDA kernels" : "", funcList(a->funcMask).c_str(),
               protoList(a->protoMask).c_str(), mark(a->name));
    return buf;
  }
  if (auto* t = (const plexusTransport_v1_t*)dlsym(lib, PLEXUS_TRANSPORT_PLUGIN_SYMBOL)) {
    if (const char* bad = checkTransportTable(t))
      snprintf(buf, sizeof buf, "transport  %s: refused: symbol %s: %s (plugin ABI %u; this Plexus expects %d)",
               path.c_str(), PLEXUS_TRANSPORT_PLUGIN_SYMBOL, bad, t->abiVersion, PLEXUS_TRANSPORT_ABI_VERSION);
    else
      snprintf(buf, sizeof buf, "transport  %-10s %s (%s, ABI %u)", t->name, path.c_str(),
               PLEXUS_TRANSPORT_PLUGIN_SYMBOL, t->abiVersion);
    return buf;
  }
  return "?          " + path + ": refused: exports none of " PLEXUS_ALGO_PLUGIN_SYMBOL ", " PLEXUS_ALGO_V1_PLUGIN_SYMBOL
         " and " PLEXUS_TRANSPORT_PLUGIN_SYMBOL;
}

void printPlugins(const Config& config) {
  const std::vector<std::string> inUse = configAlgorithms(config);
  const std::vector<std::string> dirs = pluginDirs();
  std::string searched;
  for (const std::string& d : dirs) searched += (searched.empty() ? "" : ", ") + d;
  printf("\nPlugins (searched: %s)\n", searched.c_str());
  std::vector<std::string> seen;
  for (const std::string& d : dirs) {
    DIR* dir = opendir(d.c_str());
    if (!dir) {
      // The folders beside libplexus.so may well not exist; one PLEXUS_PLUGIN_PATH names should.
      const auto path = envGet("PLUGIN_PATH");
      if (errno != ENOENT || (path && (":" + *path + ":").find(":" + d + ":") != std::string::npos))
        printf("  %s: cannot be read (%s)\n", d.c_str(), strerror(errno));
      continue;
    }
    std::vector<std::string> files;
    while (dirent* e = readdir(dir)) {
      const std::string f = e->d_name;
      const bool ours = f.rfind("libplexus-", 0) == 0 || f.rfind("libnccl-tuner", 0) == 0 ||
                        f.rfind("libnccl-net", 0) == 0 || f.rfind("libnccl-profiler", 0) == 0 ||
                        f.rfind("libnccl-env", 0) == 0;
      if (ours && f.size() > 3 && f.compare(f.size() - 3, 3, ".so") == 0) files.push_back(f);
    }
    closedir(dir);
    std::sort(files.begin(), files.end());
    for (const std::string& f : files) {
      if (std::find(seen.begin(), seen.end(), f) != seen.end()) continue;  // the first folder wins, as when loading
      seen.push_back(f);
      printf("  %s\n", survey(d + "/" + f, f, inUse).c_str());
    }
  }
  std::string names;
  for (const std::string& n : inUse) names += (names.empty() ? "" : ", ") + n;
  printf("  algorithms in use: %s (%s)\n", names.c_str(),
         envGet("ALGORITHMS") ? "PLEXUS_ALGORITHMS" : !config.algorithms.empty() ? "plugins.algorithms" : "default");
  bool none = false;
  std::vector<std::string> transports = configTransports(config, &none);
  const bool found = !none && transports.empty();
  if (found)
    for (const std::string& path : transportPluginFiles()) transports.push_back(path.substr(path.rfind('/') + 1));
  std::string list;
  for (const std::string& t : transports) list += t + ", ";
  printf("  transports in use, in order: %snet (%s)\n", list.c_str(),
         envGet("TRANSPORT_PLUGIN") ? "PLEXUS_TRANSPORT_PLUGIN"
         : !config.transports.empty() ? "plugins.transports"
                                      : "every transport plugin found; the built-in net transport last");
  const auto profiler = envGet("PROFILER_PLUGIN");
  printf("  profiler plugin: %s\n", profiler ? ("NCCL_PROFILER_PLUGIN=" + *profiler).c_str()
                                             : "libnccl-profiler.so if there is one (NCCL_PROFILER_PLUGIN unset)");
}

void printHost() {
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  printf("\nTopology\n  host %s: %ld cores online, host hash 0x%016llx%s\n", host, sysconf(_SC_NPROCESSORS_ONLN),
         (unsigned long long)hostHash(), envGet("HOSTID") ? " (from NCCL_HOSTID)" : "");
  std::string why;
  if (const HwTopology* t = HwTopology::process(&why))
    printf("  %s: %d package(s), %d NUMA node(s), %zu NVIDIA GPU(s), %zu NIC(s); this process may use %d CPU(s) [%s] "
           "(plexus-info --topology shows the tree)\n", t->source() == "live" ? "hwloc" : t->source().c_str(),
           t->packages(), t->numaNodes(), t->gpus().size(), t->nics().size(), t->usableCpus(),
           t->usableCpuList().c_str());
  else
    printf("  hwloc topology unavailable: %s\n", why.c_str());
  printf("  backend: host (buffers in host memory; ranks of one node share memory through /dev/shm)\n");
  printf("\nNet devices\n");
  SocketAddress addr;
  std::string ifName;
  if (findInterface(&addr, &ifName) == ncclSuccess)
    printf("  socket (built in): %s %s, chosen as NCCL_SOCKET_IFNAME says\n", ifName.c_str(), toString(addr).c_str());
  else
    printf("  socket (built in): %s\n", ncclGetLastError(nullptr));
  printf("  interfaces: %s\n", describeInterfaces().c_str());
}

// Every knob of the registry, two lines each: key, value and where it came from; then type, default and meaning.
int printParams() {
  size_t documented = 0;
  for (const ParamInfo& p : params()) documented += p.documented;
  printf("\nParameters (%zu knobs, %zu documented; [all]: listed by ncclParamGetAllParameterKeys only with "
         "NCCL_PARAM_DUMP_ALL=true; every key binds as NCCL_X and PLEXUS_X)\n",
         params().size(), documented);
  for (const ParamInfo& p : params()) {
    std::string source;
    const auto value = paramValue(p, &source);
    const bool computed = p.computed && source == "default";
    printf("  %-32s %-5s %s (%s)\n", p.key().c_str(), p.documented ? "" : "[all]",
           value ? (computed ? "(computed when used)" : "\"" + *value + "\"").c_str() : "(unset)", source.c_str());
    const std::string kind = std::string(p.type == ParamType::Int ? "integer" : "string") +
                             (!*p.deflt ? "" : p.computed ? ", default computed (" + std::string(p.deflt) + ")"
                                                          : ", default " + std::string(p.deflt));
    printf("  %-38s %s: %s%s\n", "", kind.c_str(), p.description,
           p.ncclAlias ? (std::string("; also PLEXUS_") + p.name).c_str() : "");
  }
  return 0;
}

// The machine's tree, and what each local rank would use: rank r takes the r-th GPU (CUDA_DEVICE_ORDER=PCI_BUS_ID),
// or the process's CPUs where there is none; its NICs nearest first (the net transport's netDeviceOrder over the
// topology's NICs), channel 0 on the one the transport would give it.
int printTopology(const Options& o) {
  std::string why;
  const HwTopology* t = HwTopology::process(&why);
  if (!t) {
    printf("\nTopology: unavailable: %s\n", why.c_str());
    return 1;
  }
  printf("\nTopology (%s): %d package(s), %d NUMA node(s), %d core(s); this process may use %d CPU(s) [%s]\n",
         t->source() == "live" ? "this machine, live" : t->source().c_str(), t->packages(), t->numaNodes(), t->cores(),
         t->usableCpus(), t->usableCpuList().c_str());
  const std::string tree = t->tree();
  for (size_t at = 0; at < tree.size();) {
    const size_t end = tree.find('\n', at);
    printf("  %s\n", tree.substr(at, end - at).c_str());
    at = end == std::string::npos ? tree.size() : end + 1;
  }
  const int ranks = o.ranksGiven ? o.ranksGiven : std::max<int>(1, (int)t->gpus().size());
  std::vector<std::string> nicIds;
  for (const HwDevice& n : t->nics()) nicIds.push_back(n.busId);
  printf("\nLocal ranks (%d)%s\n", ranks, t->gpus().empty() ? ": no NVIDIA GPU, so NICs by the CPUs' NUMA node" : "");
  for (int r = 0; r < ranks; r++) {
    const HwDevice* gpu = t->gpus().empty() ? nullptr : &t->gpus()[r % t->gpus().size()];
    const std::string cpus = gpu ? gpu->cpus : t->usableCpuList();
    int nearest = 0;
    const std::vector<int> order =
        netDeviceOrder(t, nicIds, std::vector<bool>(nicIds.size(), true), gpu ? gpu->busId : "", cpus, &nearest, nullptr);
    std::string nics;
    for (int d : order) {
      const HwDevice& n = t->nics()[d];
      const PathType p = gpu ? t->path(*gpu, n) : t->pathFromCpus(n, cpus);
      nics += (nics.empty() ? "" : ", ") + n.name + " " + pathName(p);
    }
    printf("  rank %d: %s, CPUs %s; NICs nearest first: %s; channel 0 on %s\n", r,
           gpu ? (gpu->name + " " + gpu->busId).c_str() : "no GPU", cpus.empty() ? "?" : cpus.c_str(),
           nics.empty() ? "none" : nics.c_str(),
           order.empty() ? "none" : t->nics()[order[(size_t)r % (size_t)std::max(1, nearest)]].name.c_str());
  }
  return 0;
}

// A job of o.nRanks ranks in blocks over o.nNodes nodes, seen from rank 0.
Topology jobTopology(const Options& o) {
  Topology t;
  t.nNodes = o.nNodes;
  t.cores = o.cores;
  const int perNode = (o.nRanks + o.nNodes - 1) / o.nNodes;
  for (int r = 0; r < o.nRanks; r++) {
    const int node = std::min(r / perNode, o.nNodes - 1);
    t.rankLocalRank.push_back((int)std::count(t.rankNode.begin(), t.rankNode.end(), node));
    t.rankNode.push_back(node);
  }
  t.nLocalRanks = (int)std::count(t.rankNode.begin(), t.rankNode.end(), 0);
  return t;
}

int printTuning(const Options& o, const std::shared_ptr<const Config>& config) {
  const Topology topo = jobTopology(o);
  const int nChannels = channelCount(topo);
  size_t buffSize = (size_t)envInt("BUFFSIZE", 4 << 20) & ~(size_t)(4096 * PLEXUS_STEPS - 1);
  if (buffSize < 4096 * PLEXUS_STEPS) buffSize = 4096 * PLEXUS_STEPS;
  const plexusAlgoTopo_v1_t at = algoTopology(topo, 0, nChannels, buffSize);
  const plexusAlgoProtocols_v2_t protocols = algoProtocols(topo, at);
  std::vector<const AlgoPlugin*> plugins;
  if (loadAlgorithms(communicatorAlgorithms(*config), &plugins) != ncclSuccess) {
    fprintf(stderr, "plexus-info: %s\n", ncclGetLastError(nullptr));
    return 1;
  }
  std::vector<AlgoInstance> algos;
  std::vector<std::vector<int>> orders(nChannels, std::vector<int>(o.nRanks)), parents = orders;
  for (const AlgoPlugin* p : plugins) {
    AlgoInstance inst{p, nullptr, nChannels};
    plexusAlgoGraph_v1_t graph{};
    graph.nChannels = nChannels;
    for (int c = 0; c < nChannels; c++) {
      graph.channels[c].ringOrder = orders[c].data();
      graph.channels[c].treeParents = parents[c].data();
    }
    if (p->api->init(&inst.ctx, &at, debugLog) != ncclSuccess ||
        p->api->setProtocols(inst.ctx, &protocols) != ncclSuccess || p->api->buildGraph(inst.ctx, &graph) != ncclSuccess) {
      fprintf(stderr, "plexus-info: algorithm plugin '%s' (%s) failed to start for this job\n", p->name.c_str(),
              p->path.c_str());
      return 1;
    }
    if (graph.maxChannels > 0) inst.maxChannels = std::min(graph.maxChannels, nChannels);
    algos.push_back(inst);
  }
  Tuning tuning;
  if (tuningInit(&tuning, &algos, config, 0, o.nRanks, o.nNodes, nChannels, buffSize / PLEXUS_STEPS) != ncclSuccess) {
    fprintf(stderr, "plexus-info: %s\n", ncclGetLastError(nullptr));
    return 1;
  }
  std::string spec, source = "default";
  if (auto env = envGet("TUNER_PLUGIN")) spec = *env, source = "NCCL_TUNER_PLUGIN=" + spec;
  else if (!config->tuner.empty()) spec = config->tuner, source = "plugins.tuner of " + config->path;
  std::string tunerReport;
  const TunerPlugin* tuner = loadTuner(spec, source, &tunerReport, netPluginSpec(config->net));
  ncclNvlDomainInfo_v6_t nvl{o.nNodes, topo.nLocalRanks, topo.nLocalRanks};
  bool started = false;
  if (tuningStartTuner(&tuning, tuner, 0, nvl, &started) != ncclSuccess) {
    fprintf(stderr, "plexus-info: %s\n", ncclGetLastError(nullptr));
    return 1;
  }
  printf("\nTuning for %d ranks on %d node(s) (%d per node, %d cores each: %d channel(s)%s, %s per connection)\n",
         o.nRanks, o.nNodes, topo.nLocalRanks, o.cores, nChannels, at.coresShared ? ", ranks share cores" : "",
         bytesText(buffSize).c_str());
  printf("  rules: %s; tuner: %s\n", config->path.empty() ? "no configuration file" : config->path.c_str(),
         started ? tuner->label.c_str() : tunerReport.empty() ? "none" : tunerReport.c_str());
  printf("  %-13s %-24s %-14s %8s %9s  %s\n", "collective", "bytes", "algo/proto", "channels", "chunk", "why (at the range's first size)");
  const ncclFunc_t funcs[] = {ncclFuncAllReduce, ncclFuncBroadcast, ncclFuncReduce, ncclFuncAllGather,
                              ncclFuncReduceScatter};
  constexpr size_t kMax = 1ull << 30;
  int failures = 0;
  for (ncclFunc_t f : funcs) {
    size_t lo = 0;
    Decision first{};
    bool open = false;
    auto flush = [&](size_t hi) {
      if (!open) return;
      const std::string range = "[" + bytesText(lo) + ", " + (hi > kMax ? std::string("...") : bytesText(hi)) + ")";
      const std::string ap = algos[first.algo].plugin->name + "/" + protoName(first.proto);
      printf("  %-13s %-24s %-14s %8d %9s  %s\n", funcName(f), range.c_str(), ap.c_str(), first.nChannels,
             bytesText(first.chunkBytes).c_str(), first.reason);
    };
    for (size_t bytes = 8; bytes <= kMax; bytes *= 2) {
      Decision d;
      if (tuningDecide(tuning, f, bytes, &d) != ncclSuccess) {
        flush(bytes);
        open = false;
        printf("  %-13s %-24s %s\n", funcName(f), (">= " + bytesText(bytes)).c_str(), ncclGetLastError(nullptr));
        failures++;
        break;
      }
      if (open && d.algo == first.algo && d.proto == first.proto && d.nChannels == first.nChannels &&
          d.chunkBytes == first.chunkBytes)
        continue;
      flush(bytes);
      lo = open ? bytes : 0;
      first = d;
      open = true;
    }
    flush(kMax * 2);
  }
  tuningStopTuner(&tuning);
  for (const AlgoInstance& a : algos) a.plugin->api->finalize(a.ctx);
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  addToolPluginDir(PLEXUS_INFO_LIBDIR);
  int version = 0;
  ncclGetVersion(&version);
  printf("Plexus %d.%d.%d, NCCL API %d.%d.%d\n", PLEXUS_VERSION_MAJOR, PLEXUS_VERSION_MINOR, PLEXUS_VERSION_PATCH,
         version / 10000, version / 100 % 100, version % 100);
  std::shared_ptr<const Config> config;
  if (configLoad(&config) != ncclSuccess) {
    printf("Configuration: %s\n", ncclGetLastError(nullptr));
    return 1;
  }
  printf("Configuration: %s\n", config->path.empty()
                                    ? "none (PLEXUS_CONFIG unset, no ./plexus.json, no ~/.config/plexus/plexus.json)"
                                    : config->path.c_str());
  if (o.tuning) return printTuning(o, config);
  if (o.topology) return printTopology(o);
  if (o.params) return printParams();
  printPlugins(*config);
  printHost();
  return 0;
}
