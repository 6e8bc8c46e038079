// Defaults every test binary sets before its first test, unless the caller set them: bootstrap traffic
// stays on loopback, and plugins come from the build tree.
#pragma once

#include <cstdlib>

namespace testenv {

inline void setDefaults() {
  setenv("NCCL_SOCKET_IFNAME", "lo", 0);
  setenv("PLEXUS_BOOTSTRAP_TIMEOUT", "60", 0);
  setenv("PLEXUS_PLUGIN_PATH", PLEXUS_TEST_PLUGIN_DIR, 0);
  setenv("PLEXUS_TEST_LIB_DIR", PLEXUS_TEST_LIB_DIR, 0);
  setenv("PLEXUS_TEST_BIN_DIR", PLEXUS_TEST_BIN_DIR, 0);
}

}  // namespace testenv
