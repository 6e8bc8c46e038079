/* An env plugin for the tests, built for NCCL's env ABI v1 and v2 (ENV_VERSION), exporting that version alone. Its
 * getEnv answers the names TEST_ENV_VALUES lists ("NAME=VALUE;NAME=VALUE") with their values, and every other name
 * from the process environment; TEST_ENV_INIT_FAIL makes init fail. v2's init logs one line. C99. */
#include <plexus/env.h>
#include <stdlib.h>
#include <string.h>

#ifndef ENV_VERSION
#error "ENV_VERSION must be 1 or 2"
#endif

static char value[4096];

static const char* getEnv(const char* name) {
  const char* list = getenv("TEST_ENV_VALUES");
  const size_t n = strlen(name);
  for (const char* at = list; at && *at;) {
    const char* end = strchr(at, ';');
    const size_t len = end ? (size_t)(end - at) : strlen(at);
    if (len > n && strncmp(at, name, n) == 0 && at[n] == '=' && len - n - 1 < sizeof value) {
      memcpy(value, at + n + 1, len - n - 1);
      value[len - n - 1] = 0;
      return value;
    }
    at = end ? end + 1 : at + len;
  }
  return getenv(name);
}

static ncclResult_t finalize(void) { return ncclSuccess; }

#if ENV_VERSION == 1
static ncclResult_t init(uint8_t major, uint8_t minor, uint8_t patch, const char* suffix) {
  (void)major, (void)minor, (void)patch, (void)suffix;
  return getenv("TEST_ENV_INIT_FAIL") ? ncclInternalError : ncclSuccess;
}
__attribute__((visibility("default"))) const ncclEnv_v1_t ncclEnvPlugin_v1 = {"test-env-v1", init, finalize, getEnv};
#else
static ncclResult_t init(uint8_t major, uint8_t minor, uint8_t patch, const char* suffix, ncclDebugLogger_t log) {
  if (log) log(NCCL_LOG_INFO, NCCL_ENV, __FILE__, __LINE__, "test-env-v2 for NCCL %d.%d.%d%s", major, minor, patch,
               suffix ? suffix : "");
  return getenv("TEST_ENV_INIT_FAIL") ? ncclInternalError : ncclSuccess;
}
__attribute__((visibility("default"))) const ncclEnv_v2_t ncclEnvPlugin_v2 = {"test-env-v2", init, finalize, getEnv};
#endif
