// The parameter registry: every knob Plexus and its plugins read, with its type, default and meaning, behind NCCL
// 2.30's parameter API (ncclParamBind, ncclParamGet*, ncclParamDumpAll; params.cc) and `plexus-info --params`.
// A knob's value is what envGet gives (PLEXUS_<name>, else NCCL_<name>, through the env plugin when one is loaded,
// else the configuration file's "defaults"), else the registry's default. tests/tools/test_param_registry.sh checks
// that every name the sources read through envGet / envInt / envStr is here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace plexus {

enum class ParamType { Int, Str };

struct ParamInfo {
  const char* name;  // without prefix, as envGet takes it: "BUFFSIZE"
  ParamType type;
  // The call site's default as text ("4194304"); "" where it is unset. A default the code computes says what it
  // depends on ("32768 if every rank has a core, else 64") and sets computed: reading such an integer knob that is
  // not set fails, and says so (ncclParamGetStr gives the text).
  const char* deflt;
  bool computed;
  bool ncclKnob;    // NCCL has it: listed as NCCL_<name>; else a Plexus knob, listed as PLEXUS_<name>
  bool documented;  // README.md or docs/ describe it; the rest are listed with NCCL_PARAM_DUMP_ALL=true only
  const char* description;
  const char* ncclAlias;  // NCCL's own name when it differs from name ("P2P_READ_ENABLE"), else nullptr

  // The name ncclParamGetAllParameterKeys lists: "NCCL_BUFFSIZE", "PLEXUS_SPIN".
  std::string key() const;
};

// Every knob, ordered by name.
const std::vector<ParamInfo>& params();

// The knob a full variable name binds: NCCL_<name>, PLEXUS_<name>, or NCCL_<ncclAlias>. nullptr: none.
const ParamInfo* paramFind(const std::string& key);

// The knob's value as text: envGet's (the environment, the env plugin, the configuration file), else the default
// (nullopt where it has none). *source, when given, says where it came from: "environment (NCCL_BUFFSIZE)",
// "env plugin (NCCL_BUFFSIZE)", "config file /path (NCCL_BUFFSIZE)" or "default".
std::optional<std::string> paramValue(const ParamInfo& p, std::string* source);

// An integer knob's text as envInt reads it: an integer (0x... allowed), or bytes with a K, M or G suffix.
bool paramParseInt(const std::string& text, int64_t* out);

// NCCL_PARAM_DUMP_ALL=true (or 1): every knob is listed, not only the documented ones.
bool paramDumpAll();

}  // namespace plexus
