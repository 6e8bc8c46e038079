#include "debug.h"

#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "env.h"

namespace plexus {

std::string format(const char* fmt, ...) {
  char buf[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}


std::atomic<int> debugLevel{-1};
static std::atomic<unsigned long> debugMask{NCCL_INIT | NCCL_BOOTSTRAP | NCCL_ENV};  // NCCL's default subsystems
static FILE* debugFile = stderr;
static std::string debugFileName;  // NCCL_DEBUG_FILE, expanded; opened at the first line written
static std::mutex debugMutex;
static char hostName[64] = "";
static thread_local int threadRank = -1;

void debugSetThreadRank(int rank) { threadRank = rank; }

static const struct {
  const char* name;
  unsigned long flag;
} kSubsys[] = {{"INIT", NCCL_INIT},       {"COLL", NCCL_COLL},       {"P2P", NCCL_P2P},
               {"SHM", NCCL_SHM},         {"NET", NCCL_NET},         {"GRAPH", NCCL_GRAPH},
               {"TUNING", NCCL_TUNING},   {"ENV", NCCL_ENV},         {"ALLOC", NCCL_ALLOC},
               {"CALL", NCCL_CALL},       {"PROXY", NCCL_PROXY},     {"NVLS", NCCL_NVLS},
               {"BOOTSTRAP", NCCL_BOOTSTRAP}, {"REG", NCCL_REG},     {"PROFILE", NCCL_PROFILE},
               {"RAS", NCCL_RAS},         {"DESTROY", NCCL_DESTROY}, {"ALL", (unsigned long)NCCL_ALL}};

static unsigned long parseSubsys(const std::string& spec) {
  bool invert = !spec.empty() && spec[0] == '^';
  unsigned long mask = 0;
  size_t pos = invert ? 1 : 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    std::string tok = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    for (auto& s : kSubsys)
      if (strcasecmp(tok.c_str(), s.name) == 0) mask |= s.flag;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return invert ? ~mask : mask;
}

// A process that never logs leaves no empty file behind (a launcher's parent, say).
static void openDebugFile() {
  if (FILE* f = fopen(debugFileName.c_str(), "w")) {
    setvbuf(f, nullptr, _IOLBF, 4096);
    debugFile = f;
  } else {
    fprintf(stderr, "%s:%d NCCL WARN cannot open NCCL_DEBUG_FILE %s: %s; logging to stderr\n", hostName, getpid(),
            debugFileName.c_str(), strerror(errno));
  }
  debugFileName.clear();
}

// The environment is read before debugMutex is taken: envGet takes the environment's lock, under which a net
// plugin's init may log (lock order: environment, then log).
void debugInit() {
  if (debugLevel.load(std::memory_order_acquire) >= 0) return;
  char host[sizeof(hostName)] = "";
  gethostname(host, sizeof(host) - 1);
  if (char* dot = strchr(host, '.')) *dot = '\0';
  int level = NCCL_LOG_NONE;
  unsigned long mask = NCCL_INIT | NCCL_BOOTSTRAP | NCCL_ENV;
  std::string fileName;
  if (auto v = envGet("DEBUG")) {
    if (strcasecmp(v->c_str(), "VERSION") == 0) level = NCCL_LOG_VERSION;
    else if (strcasecmp(v->c_str(), "WARN") == 0) level = NCCL_LOG_WARN;
    else if (strcasecmp(v->c_str(), "INFO") == 0) level = NCCL_LOG_INFO;
    else if (strcasecmp(v->c_str(), "ABORT") == 0) level = NCCL_LOG_ABORT;
    else if (strcasecmp(v->c_str(), "TRACE") == 0) level = NCCL_LOG_TRACE;
  }
  if (auto v = envGet("DEBUG_SUBSYS")) mask = parseSubsys(*v);
  if (level > NCCL_LOG_VERSION) {
    if (auto path = envGet("DEBUG_FILE")) {
      std::string name;
      for (size_t i = 0; i < path->size(); i++) {
        if ((*path)[i] == '%' && i + 1 < path->size()) {
          char c = (*path)[++i];
          if (c == 'h') name += host;
          else if (c == 'p') name += std::to_string(getpid());
          else if (c == '%') name += '%';
          else { name += '%'; name += c; }
        } else {
          name += (*path)[i];
        }
      }
      fileName = name;
    }
  }
  std::lock_guard<std::mutex> lock(debugMutex);
  if (debugLevel.load(std::memory_order_relaxed) >= 0) return;
  memcpy(hostName, host, sizeof(hostName));
  debugMask.store(mask, std::memory_order_relaxed);
  debugFileName = fileName;
  debugLevel.store(level, std::memory_order_release);
}

void debugLog(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  if (debugLevel.load(std::memory_order_acquire) < 0) debugInit();
  if ((int)level > debugLevel.load(std::memory_order_relaxed)) return;
  if (level != NCCL_LOG_WARN && !(flags & debugMask.load(std::memory_order_relaxed))) return;
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  const char* lvl = level == NCCL_LOG_WARN ? "WARN" : level == NCCL_LOG_TRACE ? "TRACE" : "INFO";
  const char* base = strrchr(file, '/');
  char rank[16] = "";
  if (threadRank >= 0) snprintf(rank, sizeof(rank), " [%d]", threadRank);
  long tid = syscall(SYS_gettid);
  std::lock_guard<std::mutex> lock(debugMutex);
  if (!debugFileName.empty()) openDebugFile();
  if (level == NCCL_LOG_WARN)
    fprintf(debugFile, "%s:%d:%ld%s NCCL %s %s:%d %s\n", hostName, getpid(), tid, rank, lvl, base ? base + 1 : file,
            line, msg);
  else
    fprintf(debugFile, "%s:%d:%ld%s NCCL %s %s\n", hostName, getpid(), tid, rank, lvl, msg);
}

}  // namespace plexus
