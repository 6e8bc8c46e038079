// Error plumbing: one result type across every boundary; a failing call logs file:line as the error
// travels up, so a failure reads like a backtrace (NCCL's NCCLCHECK, without the gotos).
#pragma once

#include <plexus/types.h>

#include <string>

#include "debug.h"

struct ncclComm;

namespace plexus {

// The message ncclGetLastError returns: per communicator, and per thread for calls without one.
// setError formats it, logs it as a WARN and returns `result` so that call sites read
// `return setError(comm, ncclInvalidArgument, "...")`.
ncclResult_t setError(ncclComm* comm, ncclResult_t result, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
const char* lastError(ncclComm* comm);
// Whether msg is the last error setError reported on this thread: a caller that passes a failure on (commFail) then
// does not log it a second time.
bool isThreadLastError(const char* msg);

}  // namespace plexus

#define NCCLCHECK(call)                                                               \
  do {                                                                                \
    ncclResult_t res_ = (call);                                                       \
    if (res_ != ncclSuccess && res_ != ncclInProgress) {                              \
      TRACE(NCCL_ALL, "%s:%d -> %d", __FILE__, __LINE__, (int)res_);                  \
      return res_;                                                                    \
    }                                                                                 \
  } while (0)

#define SYSCHECK(call, name)                                                                           \
  do {                                                                                                 \
    if ((call) < 0) return ::plexus::setError(nullptr, ncclSystemError, "%s failed: %s", name, strerror(errno)); \
  } while (0)
