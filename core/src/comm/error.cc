#include <cstdarg>
#include <cstdio>

#include "comm/communicator.h"
#include "misc/check.h"

namespace plexus {

static thread_local std::string threadLastError;

ncclResult_t setError(ncclComm* comm, ncclResult_t result, const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  WARN("%s", msg);
  threadLastError = msg;
  if (comm && commIsLive(comm)) {
    std::lock_guard<std::mutex> lock(comm->errorMutex);
    comm->lastError = msg;
  }
  return result;
}

bool isThreadLastError(const char* msg) { return threadLastError == msg; }

const char* lastError(ncclComm* comm) {
  if (comm && commIsLive(comm)) {
    std::lock_guard<std::mutex> lock(comm->errorMutex);
    if (!comm->lastError.empty()) {
      // Copy to thread-local storage: the comm's string may change under another thread.
      static thread_local std::string copy;
      copy = comm->lastError;
      return copy.c_str();
    }
  }
  return threadLastError.c_str();
}

}  // namespace plexus
