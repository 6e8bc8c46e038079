// plexus-gpu-tests <test> [args]: the GPU tests, one ctest each (tests/gpu/CMakeLists.txt). Exit 0 pass, 1 fail,
// 77 skipped (no usable CUDA device).
#include <cstdio>
#include <cstring>

#include "gpu_test.h"

namespace gt {
int testCollectives(int argc, char** argv);
int testStream(int argc, char** argv);
int testGraph(int argc, char** argv);
int testAbort(int argc, char** argv);
int testPointers(int argc, char** argv);
int testInitAll(int argc, char** argv);
int testSyncProbe(int argc, char** argv);
int testOneSided(int argc, char** argv);
}  // namespace gt

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  struct Entry {
    const char* name;
    int (*fn)(int, char**);
    const char* args;
  };
  const Entry tests[] = {
      {"collectives", gt::testCollectives, "<group|threads|procs> <nranks> [full|medium|proto|procs|quick|small|host]"},
      {"stream", gt::testStream, "<group|threads|procs> <nranks>"},
      {"graph", gt::testGraph, "<group|threads|procs> <nranks>"},
      {"abort", gt::testAbort, ""},
      {"pointers", gt::testPointers, "<cuda|host-env|set-device>"},
      {"initall", gt::testInitAll, ""},
      {"syncprobe", gt::testSyncProbe, ""},
      {"onesided", gt::testOneSided, "<group|threads|procs> <nranks>"},
  };
  if (argc >= 2)
    for (const Entry& e : tests)
      if (std::strcmp(argv[1], e.name) == 0) return e.fn(argc - 1, argv + 1);
  std::fprintf(stderr, "usage: %s <test> [args]\n", argv[0]);
  for (const Entry& e : tests) std::fprintf(stderr, "  %s %s\n", e.name, e.args);
  return 2;
}
