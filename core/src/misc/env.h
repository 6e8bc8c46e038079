// Environment knobs. NCCL_<NAME> is honoured; PLEXUS_<NAME> wins where both are set.
#pragma once

#include <nccl.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

namespace plexus {

// The raw value of PLEXUS_<name>, else NCCL_<name>, else the configuration file's default for either
// (config/config.h), else nullopt. name has no prefix ("DEBUG").
std::optional<std::string> envGet(const char* name);
// NCCL's env plugin (NCCL_ENV_PLUGIN; plexus/env.h) supplies every value above when one is loaded (once per process,
// at the first read). envPluginCheck logs what was loaded (once) and returns its init's result, which ncclGetUniqueId
// and communicator init return, as NCCL's do.
ncclResult_t envPluginCheck();

// Integer knob; a value that does not parse is reported once (WARN) and the default is used, since
// env knobs are advisory and the message says which variable to fix.
int64_t envInt(const char* name, int64_t deflt);
std::string envStr(const char* name, const std::string& deflt);

// Held while the environment is read here, and around plugin calls that may change it (real net
// plugins set variables in init): glibc's getenv is not safe against a concurrent setenv.
std::recursive_mutex& envMutex();

}  // namespace plexus
