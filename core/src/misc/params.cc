// NCCL 2.30's parameter API over one registry of every knob Plexus and its plugins read (params.h): bind a key
// ("NCCL_BUFFSIZE" or "PLEXUS_BUFFSIZE"), read it as an integer of any width, as text or as raw bytes, list the keys,
// log them all. Values are read afresh at each call, as envGet reads them.
#include "params.h"

#include <nccl.h>
#include <strings.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <type_traits>

#include "config/config.h"
#include "misc/check.h"
#include "misc/env.h"

namespace plexus {

namespace {

constexpr ParamType I = ParamType::Int;
constexpr ParamType S = ParamType::Str;
constexpr bool kNccl = true, kPlexus = false;
constexpr bool kDoc = true, kAll = false;
constexpr bool kFixed = false, kComputed = true;

// Every knob, by name. Defaults are the call sites' (see each description's file); where NCCL has the knob it is
// listed under NCCL_; documented: README.md (or docs/) describes it under either name.
const std::vector<ParamInfo>& table() {
  static const std::vector<ParamInfo> t = [] {
    std::vector<ParamInfo> v = {
        {"ALGO", S, "", kFixed, kNccl, kDoc, "algorithms allowed, NCCL's syntax (^ excludes); unset: all", nullptr},
        {"ALGORITHMS", S, "ring,direct,tree", kFixed, kPlexus, kDoc,
         "algorithm plugins to load, by name or path (overrides the config file's plugins.algorithms)", nullptr},
        {"BACKEND", S, "auto", kFixed, kPlexus, kDoc, "host, cuda or auto (CUDA where a device is present)", nullptr},
        {"BOOTSTRAP_TIMEOUT", I, "PLEXUS_TIMEOUT if set, else 120", kComputed, kPlexus, kDoc,
         "seconds to reach the bootstrap root and for each exchange and connection setup", nullptr},
        {"BUFFSIZE", I, "4194304", kFixed, kNccl, kDoc, "Simple-protocol bytes per connection (K, M, G suffixes)",
         nullptr},
        {"CHECK_MODE", I, "0", kFixed, kPlexus, kDoc, "1: cross-check every collective's arguments across ranks",
         nullptr},
        {"CMA", I, "1", kFixed, kPlexus, kDoc,
         "0: point-to-point between processes does not use process_vm_writev (p2p-nvlink)", nullptr},
        {"COMM_ID", S, "", kFixed, kNccl, kDoc, "ip:port of the bootstrap root; unset: from ncclGetUniqueId", nullptr},
        {"CONFIG", S, "", kFixed, kPlexus, kDoc,
         "the configuration file; unset: ./plexus.json, then ~/.config/plexus/plexus.json", nullptr},
        {"CUDA_DRIVER", S, "libcuda.so.1", kFixed, kPlexus, kDoc, "the CUDA driver library to load", nullptr},
        {"CUMEM_ENABLE", I, "1", kFixed, kNccl, kAll,
         "0: p2p-nvlink shares device memory through legacy CUDA IPC (as PLEXUS_P2P_IPC=legacy)", nullptr},
        {"DEBUG", S, "", kFixed, kNccl, kDoc, "log level: VERSION, WARN, INFO, TRACE; unset: none", nullptr},
        {"DEBUG_FILE", S, "", kFixed, kNccl, kDoc, "log file (%h host, %p pid); unset: stderr", nullptr},
        {"DEBUG_SUBSYS", S, "INIT,BOOTSTRAP,ENV", kFixed, kNccl, kDoc, "subsystems logged at INFO (^ negates)",
         nullptr},
        {"ENV_PLUGIN", S, "", kFixed, kNccl, kDoc,
         "NCCL env plugin (name, path or none); unset: libnccl-env.so if present", nullptr},
        {"GDR_FLUSH_DISABLE", I, "0", kFixed, kNccl, kAll, "1: net-ib does not flush GPU Direct RDMA receives",
         nullptr},
        {"HOSTID", S, "", kFixed, kNccl, kDoc, "host identity; unset: host name + boot id", nullptr},
        {"IB_ADDR_FAMILY", S, "AF_INET", kFixed, kNccl, kAll, "net-ib RoCE GID address family: AF_INET or AF_INET6",
         nullptr},
        {"IB_GID_INDEX", I, "-1", kFixed, kNccl, kDoc, "net-ib: the GID table entry to use; -1: chosen", nullptr},
        {"IB_HCA", S, "", kFixed, kNccl, kDoc, "net-ib: HCAs (and ports) to use or (^) exclude; unset: all", nullptr},
        {"IB_MTU", I, "0", kFixed, kNccl, kAll, "net-ib: path MTU enum (1..5); 0: the port's active MTU", nullptr},
        {"IB_QPS_PER_CONNECTION", I, "1", kFixed, kNccl, kDoc, "net-ib: queue pairs per connection (1..16)", nullptr},
        {"IB_RETRY_CNT", I, "7", kFixed, kNccl, kAll, "net-ib: transport retries (0..7)", nullptr},
        {"IB_ROCE_VERSION_NUM", I, "2", kFixed, kNccl, kAll, "net-ib: RoCE version of the GID to choose (1 or 2)",
         nullptr},
        {"IB_SL", I, "0", kFixed, kNccl, kAll, "net-ib: InfiniBand service level (0..15)", nullptr},
        {"IB_TC", I, "0", kFixed, kNccl, kAll, "net-ib: traffic class (0..255)", nullptr},
        {"IB_TIMEOUT", I, "20", kFixed, kNccl, kAll, "net-ib: ack timeout exponent (1..31)", nullptr},
        {"IB_VERBS_LIBRARY", S, "libibverbs.so.1", kFixed, kPlexus, kAll, "net-ib: the libibverbs to load", nullptr},
        {"IGNORE_CPU_AFFINITY", I, "0", kFixed, kNccl, kDoc,
         "1: a CUDA communicator's threads run on its GPU's CPUs whatever the job's affinity", nullptr},
        {"LAUNCH_DELAY_US", I, "20", kFixed, kPlexus, kDoc,
         "how long a stream's worker leaves new work to a synchronizing thread", nullptr},
        {"LL_BUFFSIZE", I, "256 KiB, up to 4 MiB where ranks outnumber cores", kComputed, kNccl, kDoc,
         "LL-protocol bytes per connection between host ranks: slots of 4 KiB, a small operation each, that a rank "
         "runs ahead of its receiver (K, M suffixes)",
         nullptr},
        {"MAX_NCHANNELS", I, "32", kFixed, kNccl, kDoc, "most channels per communicator", nullptr},
        {"MIN_CHANNEL_BYTES", I, "524288", kFixed, kPlexus, kDoc, "smallest share of a collective worth a channel",
         nullptr},
        {"MIN_NCHANNELS", I, "1", kFixed, kNccl, kDoc, "fewest channels per communicator", nullptr},
        {"NET", S, "", kFixed, kNccl, kDoc, "the net to use, by name; unset: the first that loads", nullptr},
        {"NET_GDR", I, "1", kFixed, kPlexus, kDoc,
         "0: CUDA connections across nodes stage through host memory even where the net reads GPU memory", nullptr},
        {"NET_PTR", I, "1", kFixed, kPlexus, kDoc,
         "0: on the host backend the net proxy moves every step through the connection's slots; 1: point-to-point "
         "messages and collectives' steps of 64 KiB or more go straight from and into the user's buffers",
         nullptr},
        {"NET_PLUGIN", S, "", kFixed, kNccl, kDoc,
         "net plugins to try; unset: the config file's plugins.net, else libnccl-net.so if present", nullptr},
        {"NET_TIMEOUT", I, "0", kFixed, kPlexus, kDoc,
         "seconds a net send may stay incomplete before the operation fails; 0: wait", nullptr},
        {"NSOCKS_PERTHREAD", I, "1", kFixed, kNccl, kDoc, "socket net: data sockets per helper thread", nullptr},
        {"NTHREADS", I, "512", kFixed, kNccl, kDoc, "CUDA threads per block (a multiple of 32, 64..1024)", nullptr},
        {"OFI_CLOSE_TIMEOUT_MS", I, "5000", kFixed, kPlexus, kAll,
         "net-ofi: a close waits this long at most for transfers already moving", nullptr},
        {"OFI_KEEPALIVE_MS", I, "1000", kFixed, kPlexus, kAll, "net-ofi: keepalive interval", nullptr},
        {"OFI_MR_REGISTER", I, "0", kFixed, kPlexus, kAll,
         "net-ofi: 1: register memory even where the provider does not need it", nullptr},
        {"OFI_PEER_TIMEOUT_MS", I, "20000", kFixed, kPlexus, kAll, "net-ofi: a silent peer is dead after this long",
         nullptr},
        {"P2P_COLLECTIVES", I, "1 where the node's ranks are threads of one process or GPUs, else 0", kComputed, kPlexus,
         kDoc, "0: collectives never go to algo-p2p; 1: they may where its cost model wins", nullptr},
        {"P2P_CONNECT_TIMEOUT", S, "PLEXUS_BOOTSTRAP_TIMEOUT + 30", kComputed, kPlexus, kAll,
         "p2p-nvlink: seconds a connect waits for the peer process", nullptr},
        {"P2P_DISABLE", I, "0", kFixed, kNccl, kAll, "1: p2p-nvlink does not access another device's memory", nullptr},
        {"P2P_IPC", S, "", kFixed, kPlexus, kAll, "p2p-nvlink: legacy: share device memory through CUDA IPC", nullptr},
        {"P2P_JOIN", I, "1", kFixed, kPlexus, kDoc,
         "host backend: 0: a stream never runs a launch of sends and receives in the pass of the one before it",
         nullptr},
        {"P2P_LL_THRESHOLD", I, "64", kFixed, kNccl, kDoc,
         "sends and receives of at most this many bytes cross as LL lines (host ranks over p2p-nvlink)", nullptr},
        {"P2P_READ", I, "0", kFixed, kNccl, kAll, "p2p-nvlink: 1: the receiver reads from the sender's buffer",
         "P2P_READ_ENABLE"},
        {"PARAM_DUMP_ALL", S, "false", kFixed, kNccl, kDoc,
         "true or 1: ncclParamGetAllParameterKeys and ncclParamDumpAll give every knob, not only documented ones",
         nullptr},
        {"PLUGIN_PATH", S, "", kFixed, kPlexus, kDoc, "folders searched for plugins before lib/plexus/", nullptr},
        {"PROFILER_PLUGIN", S, "", kFixed, kNccl, kDoc,
         "NCCL profiler plugin (name, path or none); unset: libnccl-profiler.so if present", nullptr},
        {"PROFILER_TRACE", S, "", kFixed, kPlexus, kDoc, "profiler-trace: file prefix; unset: no trace", nullptr},
        {"PROFILER_TRACE_MASK", I, "every event the plugin draws", kComputed, kPlexus, kAll,
         "profiler-trace: the ncclProfile* bits to ask for", nullptr},
        {"PROFILER_TRACE_MAX", I, "1000000", kFixed, kPlexus, kAll, "profiler-trace: events kept per communicator",
         nullptr},
        {"PROTO", S, "", kFixed, kNccl, kDoc, "protocols allowed: LL, LL128, Simple (^ excludes); unset: all", nullptr},
        {"REPORT_SIGNAL", I, "1", kFixed, kPlexus, kDoc, "0: no SIGUSR1 hang-report handler", nullptr},
        {"RMA_INLINE_BYTES", I, "4096", kFixed, kPlexus, kDoc,
         "one-sided puts up to this size that the origin cannot write itself travel with their header on the "
         "one-sided socket; larger ones through a transport's connector (the net plugin between nodes)", nullptr},
        {"SOCKET_FAMILY", S, "", kFixed, kNccl, kDoc, "AF_INET or AF_INET6; unset: any", nullptr},
        {"SOCKET_IFNAME", S, "", kFixed, kNccl, kDoc,
         "interfaces: prefixes, ^ excludes, = exact; unset: ib, else the bootstrap's subnet, else not docker or lo",
         nullptr},
        {"SOCKET_INLINE", I, "16384", kFixed, kNccl, kAll, "socket net: below this a send is copied by the caller",
         nullptr},
        {"SOCKET_MIN_TASKSIZE", I, "65536", kFixed, kNccl, kAll, "socket net: smallest share of a helper thread",
         nullptr},
        {"SOCKET_NTHREADS", I, "1", kFixed, kNccl, kDoc, "socket net: helper threads per connection", nullptr},
        {"SOCKET_RETRY_CNT", I, "34", kFixed, kNccl, kAll, "socket net: connect retries", nullptr},
        {"SOCKET_RETRY_SLEEP_MSEC", I, "100", kFixed, kNccl, kAll, "socket net: pause between connect retries",
         nullptr},
        {"SOCKET_SPIN_USEC", I, "0", kFixed, kNccl, kAll, "socket net: how long a helper thread spins for work",
         nullptr},
        {"SPIN", I, "32768 if every rank has a core, else 64", kComputed, kPlexus, kDoc,
         "polls a waiting host kernel spins before yielding its core", nullptr},
        {"TIMEOUT", I, "0", kFixed, kPlexus, kDoc, "seconds an operation may wait on a peer; 0: forever", nullptr},
        {"TOPO_DUMP_FILE", S, "", kFixed, kNccl, kDoc, "where to write the topology in use (hwloc XML)", nullptr},
        {"TOPO_FILE", S, "", kFixed, kNccl, kDoc, "an hwloc XML topology to use instead of this machine's", nullptr},
        {"TRANSPORT_PLUGIN", S, "", kFixed, kPlexus, kDoc,
         "transport plugins to try, in order, or none; unset: every one found", nullptr},
        {"TUNER_CONFIG_FILE", S, "nccl_tuner.conf", kFixed, kNccl, kDoc, "the CSV file of tuner-csv", nullptr},
        {"TUNER_PLUGIN", S, "", kFixed, kNccl, kDoc,
         "NCCL tuner plugin (name, path or none); unset: libnccl-tuner.so if present", nullptr},
        {"UCX_CLOSE_TIMEOUT", S, "5", kFixed, kPlexus, kAll, "net-ucx: seconds a close waits", nullptr},
        {"UCX_CONNECT_TIMEOUT", S, "120", kFixed, kPlexus, kAll, "net-ucx: seconds a connect waits", nullptr},
        {"UCX_ERROR_MODE", S, "none", kFixed, kPlexus, kAll, "net-ucx: UCX endpoint error mode, none or peer", nullptr},
        {"UCX_REGISTER", I, "1", kFixed, kPlexus, kAll, "net-ucx: 0: do not register memory with UCX", nullptr},
        {"WATCHDOG_MS", I, "100", kFixed, kPlexus, kDoc, "how often the watchdog looks for waits on dead processes",
         nullptr},
        {"WORK_STORAGE", S, "auto", kFixed, kPlexus, kDoc, "where a launch's work items travel: auto, args, fifo",
         nullptr},
    };
    std::sort(v.begin(), v.end(), [](const ParamInfo& a, const ParamInfo& b) { return strcmp(a.name, b.name) < 0; });
    return v;
  }();
  return t;
}

// The listed keys, kept for the process (ncclParamGetAllParameterKeys hands out pointers into them).
const std::vector<std::string>& listedKeys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k;
    for (const ParamInfo& p : params()) k.push_back(p.key());
    return k;
  }();
  return keys;
}

std::string upper(std::string s) {
  for (char& c : s) c = (char)toupper((unsigned char)c);
  return s;
}

}  // namespace

std::string ParamInfo::key() const {
  return ncclKnob ? "NCCL_" + std::string(ncclAlias ? ncclAlias : name) : "PLEXUS_" + std::string(name);
}

const std::vector<ParamInfo>& params() { return table(); }

const ParamInfo* paramFind(const std::string& key) {
  for (const ParamInfo& p : params()) {
    const std::string n = p.name;
    if (key == "NCCL_" + n || key == "PLEXUS_" + n || (p.ncclAlias && key == "NCCL_" + std::string(p.ncclAlias)))
      return &p;
  }
  return nullptr;
}

namespace {

// Where envGet found value for suffix: the process environment, the config file's defaults, or else the env plugin
// (which may answer for variables the environment does not have).
std::string sourceOf(const char* suffix, const std::string& value) {
  const std::string plexusName = std::string("PLEXUS_") + suffix, ncclName = std::string("NCCL_") + suffix;
  std::string fromEnv, fromConfig;
  bool plexusSet = false, ncclSet = false;
  {
    std::lock_guard<std::recursive_mutex> lock(envMutex());
    if (const char* e = getenv(plexusName.c_str())) plexusSet = true, fromEnv = e;
    if (const char* e = getenv(ncclName.c_str()); e && !plexusSet) ncclSet = true, fromEnv = e;
  }
  const std::string& setName = plexusSet ? plexusName : ncclName;
  if ((plexusSet || ncclSet) && fromEnv == value) return "environment (" + setName + ")";
  if (configDefault(plexusName, &fromConfig) && fromConfig == value)
    return "config file (" + plexusName + " in \"defaults\")";
  if (configDefault(ncclName, &fromConfig) && fromConfig == value)
    return "config file (" + ncclName + " in \"defaults\")";
  return "env plugin (" + (plexusSet || ncclSet ? setName : ncclName) + ")";
}

}  // namespace

std::optional<std::string> paramValue(const ParamInfo& p, std::string* source) {
  for (const char* suffix : {p.name, p.ncclAlias}) {
    if (!suffix) continue;
    std::optional<std::string> v = envGet(suffix);
    if (!v || (p.type == ParamType::Int && v->empty())) continue;  // envInt: an empty value is the default
    if (source) *source = sourceOf(suffix, *v);
    return v;
  }
  if (source) *source = "default";
  if (!*p.deflt) return std::nullopt;
  return std::string(p.deflt);
}

bool paramParseInt(const std::string& text, int64_t* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long x = strtoll(text.c_str(), &end, 0);
  if (*end == '\0' && end != text.c_str()) {
    if (errno == ERANGE) return false;
    *out = x;
    return true;
  }
  uint64_t bytes = 0;
  if (parseBytes(text, &bytes) && bytes <= (uint64_t)INT64_MAX) {
    *out = (int64_t)bytes;
    return true;
  }
  return false;
}

bool paramDumpAll() {
  const std::optional<std::string> v = envGet("PARAM_DUMP_ALL");
  if (!v) return false;
  int64_t n = 0;
  return strcasecmp(v->c_str(), "true") == 0 || strcasecmp(v->c_str(), "yes") == 0 || (paramParseInt(*v, &n) && n != 0);
}

}  // namespace plexus

using namespace plexus;

// A bound key: the knob, and the name the caller used (messages say it back).
struct ncclParamHandle {
  const ParamInfo* info;
  std::string key;
};

namespace {

std::mutex handleMutex;
std::map<std::string, std::unique_ptr<ncclParamHandle>>& handles() {
  static auto* h =
      new std::map<std::string, std::unique_ptr<ncclParamHandle>>();  // for the process: handles stay valid
  return *h;
}
std::set<const ncclParamHandle*>& validHandles() {
  static auto* s = new std::set<const ncclParamHandle*>();
  return *s;
}

constexpr const char* kListHint =
    "ncclParamGetAllParameterKeys lists the keys, and `NCCL_PARAM_DUMP_ALL=true plexus-info --params` prints every "
    "one with its value";

ncclResult_t checkHandle(const char* fn, ncclParamHandle_t h, const void* out) {
  if (!h) return setError(nullptr, ncclInvalidArgument, "%s: the handle is NULL; get one from ncclParamBind", fn);
  {
    std::lock_guard<std::mutex> lock(handleMutex);
    if (!validHandles().count(h))
      return setError(nullptr, ncclInvalidArgument, "%s: %p is not a handle ncclParamBind gave; bind the key first", fn,
                      (const void*)h);
  }
  if (!out) return setError(nullptr, ncclInvalidArgument, "%s: %s: the output pointer is NULL", fn, h->key.c_str());
  return ncclSuccess;
}

// The knob's value as an integer, or an error that says why it has none.
ncclResult_t intValue(const char* fn, const ncclParamHandle* h, int64_t* out) {
  const ParamInfo& p = *h->info;
  std::string source;
  const std::optional<std::string> v = paramValue(p, &source);
  if (!v)
    return setError(nullptr, ncclInvalidArgument,
                    "%s: %s is not set and has no default value; set it, or read it with ncclParamGetStr (\"\")", fn,
                    h->key.c_str());
  if (p.computed && source == "default")
    return setError(nullptr, ncclInvalidArgument,
                    "%s: %s is not set, and its default is computed when it is used (%s): there is no number to give. "
                    "Set it, or read that text with ncclParamGetStr",
                    fn, h->key.c_str(), p.deflt);
  if (paramParseInt(*v, out)) return ncclSuccess;
  if (p.type == ParamType::Str)
    return setError(nullptr, ncclInvalidArgument,
                    "%s: %s is a string knob and its value \"%s\" (from %s) is not an integer; read it with "
                    "ncclParamGetStr",
                    fn, h->key.c_str(), v->c_str(), source.c_str());
  return setError(nullptr, ncclInvalidArgument,
                  "%s: %s=\"%s\" (from %s) is not an integer (K, M, G suffixes allowed), so Plexus uses its default "
                  "%s instead; fix or unset it",
                  fn, h->key.c_str(), v->c_str(), source.c_str(), p.deflt);
}

template <typename T>
ncclResult_t getInt(const char* fn, const char* typeName, ncclParamHandle_t h, T* out) {
  NCCLCHECK(checkHandle(fn, h, out));
  int64_t v = 0;
  NCCLCHECK(intValue(fn, h, &v));
  const bool fits = std::is_signed_v<T>
                        ? v >= (int64_t)std::numeric_limits<T>::min() && v <= (int64_t)std::numeric_limits<T>::max()
                        : v >= 0 && (uint64_t)v <= (uint64_t)std::numeric_limits<T>::max();
  if (!fits)
    return setError(nullptr, ncclInvalidArgument,
                    "%s: %s is %" PRId64
                    ", which does not fit in %s [%s, %s]; read it with ncclParamGetI64 (or "
                    "another type it fits in)",
                    fn, h->key.c_str(), v, typeName, std::to_string(std::numeric_limits<T>::min()).c_str(),
                    std::to_string(std::numeric_limits<T>::max()).c_str());
  *out = (T)v;
  return ncclSuccess;
}

// The "did you mean" of an unknown key: the key in capitals, or with a prefix.
std::string suggestion(const std::string& key) {
  const std::string u = upper(key);
  for (const std::string& k : {u, "NCCL_" + u, "PLEXUS_" + u})
    if (const ParamInfo* p = paramFind(k)) return " (did you mean " + p->key() + "?)";
  return "";
}

}  // namespace

#define NCCL_API(ret, func, ...)                                                                            \
  extern "C" __attribute__((visibility("default"))) __attribute__((alias(#func))) ret p##func(__VA_ARGS__); \
  extern "C" __attribute__((visibility("default"))) __attribute__((weak)) ret func(__VA_ARGS__)

NCCL_API(ncclResult_t, ncclParamBind, ncclParamHandle_t* out, const char* key);
ncclResult_t ncclParamBind(ncclParamHandle_t* out, const char* key) {
  if (!out) return setError(nullptr, ncclInvalidArgument, "ncclParamBind: out is NULL; pass where to put the handle");
  if (!key)
    return setError(nullptr, ncclInvalidArgument,
                    "ncclParamBind: the key is NULL; give a variable name (\"NCCL_BUFFSIZE\"). %s", kListHint);
  const ParamInfo* p = paramFind(key);
  if (!p)
    return setError(nullptr, ncclInvalidArgument,
                    "ncclParamBind: no knob is named \"%s\"%s. Keys are full variable names (\"NCCL_BUFFSIZE\", "
                    "\"PLEXUS_SPIN\"); %s",
                    key, suggestion(key).c_str(), kListHint);
  std::lock_guard<std::mutex> lock(handleMutex);
  std::unique_ptr<ncclParamHandle>& h = handles()[key];
  if (!h) {
    h.reset(new ncclParamHandle{p, key});
    validHandles().insert(h.get());
  }
  *out = h.get();
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclParamGetI8, ncclParamHandle_t h, int8_t* out);
ncclResult_t ncclParamGetI8(ncclParamHandle_t h, int8_t* out) { return getInt("ncclParamGetI8", "int8_t", h, out); }
NCCL_API(ncclResult_t, ncclParamGetI16, ncclParamHandle_t h, int16_t* out);
ncclResult_t ncclParamGetI16(ncclParamHandle_t h, int16_t* out) { return getInt("ncclParamGetI16", "int16_t", h, out); }
NCCL_API(ncclResult_t, ncclParamGetI32, ncclParamHandle_t h, int32_t* out);
ncclResult_t ncclParamGetI32(ncclParamHandle_t h, int32_t* out) { return getInt("ncclParamGetI32", "int32_t", h, out); }
NCCL_API(ncclResult_t, ncclParamGetI64, ncclParamHandle_t h, int64_t* out);
ncclResult_t ncclParamGetI64(ncclParamHandle_t h, int64_t* out) { return getInt("ncclParamGetI64", "int64_t", h, out); }
NCCL_API(ncclResult_t, ncclParamGetU8, ncclParamHandle_t h, uint8_t* out);
ncclResult_t ncclParamGetU8(ncclParamHandle_t h, uint8_t* out) { return getInt("ncclParamGetU8", "uint8_t", h, out); }
NCCL_API(ncclResult_t, ncclParamGetU16, ncclParamHandle_t h, uint16_t* out);
ncclResult_t ncclParamGetU16(ncclParamHandle_t h, uint16_t* out) {
  return getInt("ncclParamGetU16", "uint16_t", h, out);
}
NCCL_API(ncclResult_t, ncclParamGetU32, ncclParamHandle_t h, uint32_t* out);
ncclResult_t ncclParamGetU32(ncclParamHandle_t h, uint32_t* out) {
  return getInt("ncclParamGetU32", "uint32_t", h, out);
}
NCCL_API(ncclResult_t, ncclParamGetU64, ncclParamHandle_t h, uint64_t* out);
ncclResult_t ncclParamGetU64(ncclParamHandle_t h, uint64_t* out) {
  return getInt("ncclParamGetU64", "uint64_t", h, out);
}

NCCL_API(ncclResult_t, ncclParamGetStr, ncclParamHandle_t h, const char** out);
ncclResult_t ncclParamGetStr(ncclParamHandle_t h, const char** out) {
  NCCLCHECK(checkHandle("ncclParamGetStr", h, out));
  static thread_local std::string text;  // valid until this thread's next ncclParamGetStr
  text = paramValue(*h->info, nullptr).value_or("");
  *out = text.c_str();
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclParamGet, ncclParamHandle_t h, void* out, int maxLen, int* len);
ncclResult_t ncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len) {
  NCCLCHECK(checkHandle("ncclParamGet", h, len));
  std::string bytes;
  if (h->info->type == ParamType::Int) {
    int64_t v = 0;
    NCCLCHECK(intValue("ncclParamGet", h, &v));
    bytes.assign((const char*)&v, sizeof v);
  } else {
    bytes = paramValue(*h->info, nullptr).value_or("");
    bytes.push_back('\0');
  }
  *len = (int)bytes.size();
  if (maxLen < *len || !out)
    return setError(nullptr, ncclInvalidArgument,
                    "ncclParamGet: %s takes %d bytes (%s) and the buffer %s; *len says how many to give",
                    h->key.c_str(), *len, h->info->type == ParamType::Int ? "its int64_t" : "its text and the NUL",
                    out ? ("has " + std::to_string(maxLen)).c_str() : "is NULL");
  memcpy(out, bytes.data(), bytes.size());
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclParamGetParameter, const char* key, const char** value, int* valueLen);
ncclResult_t ncclParamGetParameter(const char* key, const char** value, int* valueLen) {
  if (!value)
    return setError(nullptr, ncclInvalidArgument, "ncclParamGetParameter: value is NULL; pass where to put it");
  ncclParamHandle_t h = nullptr;
  NCCLCHECK(ncclParamBind(&h, key));
  static thread_local std::string text;  // valid until this thread's next ncclParamGetParameter
  text = paramValue(*h->info, nullptr).value_or("");
  *value = text.c_str();
  if (valueLen) *valueLen = (int)text.size();
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclParamGetAllParameterKeys, const char*** table, int* tableLen);
ncclResult_t ncclParamGetAllParameterKeys(const char*** table, int* tableLen) {
  if (!table || !tableLen)
    return setError(nullptr, ncclInvalidArgument, "ncclParamGetAllParameterKeys: %s is NULL",
                    !table ? "table" : "tableLen");
  static thread_local std::vector<const char*> list;  // valid until this thread's next call
  list.clear();
  const bool all = paramDumpAll();
  for (size_t i = 0; i < params().size(); i++)
    if (all || params()[i].documented) list.push_back(listedKeys()[i].c_str());
  *table = list.data();
  *tableLen = (int)list.size();
  return ncclSuccess;
}

NCCL_API(void, ncclParamDumpAll, void);
void ncclParamDumpAll(void) {
  const bool all = paramDumpAll();
  INFO(NCCL_ENV, "parameters: %s",
       all ? "every knob (NCCL_PARAM_DUMP_ALL)" : "documented knobs (NCCL_PARAM_DUMP_ALL=true: all)");
  for (size_t i = 0; i < params().size(); i++) {
    const ParamInfo& p = params()[i];
    if (!all && !p.documented) continue;
    std::string source;
    const std::optional<std::string> v = paramValue(p, &source);
    INFO(NCCL_ENV, "  %s=%s (%s)%s", listedKeys()[i].c_str(), v ? v->c_str() : "", source.c_str(),
         p.computed && source == "default" ? " [computed when used]" : "");
  }
}
