// A test case that cannot run here (a plugin that was not built, hardware that is missing) must read as
// SKIPPED in ctest, never as passed. ctest runs each doctest case alone with PLEXUS_TEST_ONE_CASE=1 and
// SKIP_RETURN_CODE 77 (tests/CMakeLists.txt): the process then ends with 77 and the reason. Run by hand, with
// other cases after it, the case only says why and returns.
#pragma once

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace testskip {

// Call at the top of a test case, then return from it.
inline void skip(const std::string& why) {
  if (getenv("PLEXUS_TEST_ONE_CASE")) {
    fprintf(stderr, "SKIPPED: %s\n", why.c_str());
    fflush(nullptr);
    std::_Exit(77);
  }
  MESSAGE("SKIPPED: ", why);
}

}  // namespace testskip
