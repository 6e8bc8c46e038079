#include "log.h"

#include <cstdlib>
#include <string>

namespace plexus::net_ucx {

namespace {
// The variable that sets a knob: PLEXUS_<name> wins over NCCL_<name>.
const char* knobVariable(const char* name, std::string* variable) {
  for (const char* prefix : {"PLEXUS_", "NCCL_"}) {
    *variable = std::string(prefix) + name;
    const char* v = getenv(variable->c_str());
    if (v && *v) return v;
  }
  return nullptr;
}
}  // namespace

const char* knob(const char* name) {
  std::string variable;
  return knobVariable(name, &variable);
}

double knobSeconds(const char* name, double fallback) {
  std::string variable;
  const char* v = knobVariable(name, &variable);
  if (!v) return fallback;
  char* end = nullptr;
  double s = strtod(v, &end);
  if (end == v || *end != '\0' || !(s > 0)) {
    UCX_WARN("%s=\"%s\" is not a positive number of seconds; using %g s instead", variable.c_str(), v, fallback);
    return fallback;
  }
  return s;
}

}  // namespace plexus::net_ucx
