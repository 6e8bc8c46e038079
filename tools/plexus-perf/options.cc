// Command-line parsing: nccl-tests' flags, defaults and meanings.
#include <getopt.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

#include "perf.h"

namespace perf {
namespace {

bool gQuiet = false;

[[noreturn]] void usageError(const std::string& msg) {
  if (!gQuiet) {
    std::fprintf(stderr, "plexus-perf: %s\n\n", msg.c_str());
    printUsage(stderr);
  }
  std::exit(2);
}

long long parseInt(const char* flag, const char* s, long long lo, long long hi) {
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s, &end, 0);
  if (errno || end == s || *end != '\0' || v < lo || v > hi)
    usageError(std::string("invalid value '") + s + "' for " + flag + " (expected an integer in [" +
               std::to_string(lo) + ", " + std::to_string(hi) + "])");
  return v;
}

// "32M", "1.5K", "8": bytes with an optional K/M/G (binary) suffix.
size_t parseSize(const char* flag, const char* s) {
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(s, &end);
  double unit = 1;
  if (end != s && *end) {
    switch (*end) {
      case 'k':
      case 'K': unit = 1024.0; break;
      case 'm':
      case 'M': unit = 1024.0 * 1024; break;
      case 'g':
      case 'G': unit = 1024.0 * 1024 * 1024; break;
      default: unit = 0; break;
    }
    ++end;
    if (*end == 'b' || *end == 'B') ++end;  // tolerate "32MB"
  }
  if (errno || end == s || *end != '\0' || unit == 0 || !(v >= 0) || v * unit > 1e18)
    usageError(std::string("invalid size '") + s + "' for " + flag + " (expected bytes, optionally with K/M/G)");
  return size_t(std::llround(v * unit));
}

}  // namespace

void printUsage(FILE* out) {
  std::string colls;
  for (const Collective& c : collectives()) colls += std::string(colls.empty() ? "" : ", ") + c.name;
  std::fprintf(out,
               "USAGE: plexus-perf <collective> [options]\n"
               "  collectives: %s\n"
               "  -b,--minbytes <size>      smallest size, K/M/G suffixes allowed (default 32M)\n"
               "  -e,--maxbytes <size>      largest size (default 32M)\n"
               "  -i,--stepbytes <size>     linear increment between sizes (default 1M)\n"
               "  -f,--stepfactor <n>       multiplicative increment; overrides -i when > 1 (default 1)\n"
               "  -n,--iters <n>            timed iterations per size (default 20)\n"
               "  -w,--warmup_iters <n>     warmup iterations per size (default 1)\n"
               "  -m,--agg_iters <n>        operations aggregated into one group per iteration (default 1)\n"
               "  -c,--check <n>            validate results n times per size, 0 disables (default 1)\n"
               "  -o,--op <op>              sum|prod|min|max|avg|all (default sum)\n"
               "  -d,--datatype <type>      int8|uint8|int32|uint32|int64|uint64|half|float|double|bfloat16|\n"
               "                            f8e4m3|f8e5m2|all (default float)\n"
               "  -r,--root <rank|all>      root of rooted collectives; all (or -1) runs every root (default 0)\n"
               "  -z,--blocking <0|1|2>     1: sync and barrier after each op, 2: sync only (default 0)\n"
               "  -t,--nthreads <n>         ranks run as threads in this process (default 1)\n"
               "  -g,--ngpus <n>            host devices (ranks) per thread (default 1)\n"
               "  -a,--average <0|1|2|3>    time reported: rank 0, mean, min, max over ranks (default 1)\n"
               "  -R,--local_register <0|1|2> buffers from ncclMemAlloc, registered with ncclCommRegister (1)\n"
               "                            or ncclCommWindowRegister, symmetric (2); 0: malloc (default 0)\n"
               "  --trace <prefix>          write a timeline per rank (Chrome trace JSON, for Perfetto) to\n"
               "                            <prefix>-<commHash>-rank<r>.json, through the profiler-trace plugin\n"
               "  --cuda_device <n>         CUDA backend: every rank of this process on CUDA device n\n"
               "                            (default: rank's device index modulo the number of CUDA devices)\n"
               "  -h,--help                 this message\n"
               "Backend: CUDA (device buffers, CUDA streams) where a CUDA device is present, unless\n"
               "  PLEXUS_BACKEND=host; otherwise the host backend (host buffers and host streams).\n"
               "Launch modes: -t threads in one process; under mpirun (%s);\n"
               "  or any launcher setting PLEXUS_RANK/PLEXUS_NRANKS (or RANK/WORLD_SIZE, LOCAL_RANK) and\n"
               "  NCCL_COMM_ID=<ip:port> (or MASTER_ADDR/MASTER_PORT) in every process.\n",
               colls.c_str(),
#ifdef PLEXUS_PERF_HAVE_MPI
               "MPI: enabled"
#else
               "MPI: disabled in this build, NCCL_COMM_ID required"
#endif
  );
}

Options parseOptions(int argc, char** argv, bool quiet) {
  gQuiet = quiet;
  Options o;
  static const option longOpts[] = {{"minbytes", required_argument, nullptr, 'b'},
                                    {"maxbytes", required_argument, nullptr, 'e'},
                                    {"stepbytes", required_argument, nullptr, 'i'},
                                    {"stepfactor", required_argument, nullptr, 'f'},
                                    {"iters", required_argument, nullptr, 'n'},
                                    {"warmup_iters", required_argument, nullptr, 'w'},
                                    {"agg_iters", required_argument, nullptr, 'm'},
                                    {"check", required_argument, nullptr, 'c'},
                                    {"op", required_argument, nullptr, 'o'},
                                    {"datatype", required_argument, nullptr, 'd'},
                                    {"root", required_argument, nullptr, 'r'},
                                    {"blocking", required_argument, nullptr, 'z'},
                                    {"nthreads", required_argument, nullptr, 't'},
                                    {"ngpus", required_argument, nullptr, 'g'},
                                    {"average", required_argument, nullptr, 'a'},
                                    {"local_register", required_argument, nullptr, 'R'},
                                    {"cuda_device", required_argument, nullptr, 1000},
                                    {"trace", required_argument, nullptr, 1001},
                                    {"help", no_argument, nullptr, 'h'},
                                    {nullptr, 0, nullptr, 0}};
  opterr = 0;  // we word the errors ourselves
  int c;
  while ((c = getopt_long(argc, argv, ":b:e:i:f:n:w:m:c:o:d:r:z:t:g:a:R:h", longOpts, nullptr)) != -1) {
    const std::string flag = optopt && (c == '?' || c == ':') ? std::string("-") + char(optopt) : argv[optind - 1];
    switch (c) {
      case 'b': o.minBytes = parseSize("-b", optarg); break;
      case 'e': o.maxBytes = parseSize("-e", optarg); break;
      case 'i': o.stepBytes = parseSize("-i", optarg); break;
      case 'f': o.stepFactor = size_t(parseInt("-f", optarg, 1, 1 << 20)); break;
      case 'n': o.iters = int(parseInt("-n", optarg, 1, 1 << 30)); break;
      case 'w': o.warmup = int(parseInt("-w", optarg, 0, 1 << 30)); break;
      case 'm': o.aggIters = int(parseInt("-m", optarg, 1, 1 << 20)); break;
      case 'c': o.check = int(parseInt("-c", optarg, 0, 1 << 20)); break;
      case 'z': o.blocking = int(parseInt("-z", optarg, 0, 2)); break;
      case 't': o.nThreads = int(parseInt("-t", optarg, 1, PLEXUS_MAX_HOST_DEVICES)); break;
      case 'g': o.nGpus = int(parseInt("-g", optarg, 1, PLEXUS_MAX_HOST_DEVICES)); break;
      case 'a': o.average = int(parseInt("-a", optarg, 0, 3)); break;
      case 'R': o.localRegister = int(parseInt("-R", optarg, 0, 2)); break;
      case 1000: o.cudaDevice = int(parseInt("--cuda_device", optarg, 0, 1 << 16)); break;
      case 1001:
        // Before any communicator: the profiler plugin is loaded at the first one's init.
        if (!*optarg) usageError("--trace needs a file prefix");
        setenv("NCCL_PROFILER_PLUGIN", "trace", 1);
        setenv("PLEXUS_PROFILER_TRACE", optarg, 1);
        break;
      case 'r':
        o.root = std::string(optarg) == "all" ? -1 : int(parseInt("-r", optarg, -1, PLEXUS_MAX_HOST_DEVICES));
        break;
      case 'o': {
        ncclRedOp_t op;
        if (std::string(optarg) == "all")
          o.ops = allOps();
        else if (parseOp(optarg, &op))
          o.ops = {op};
        else
          usageError(std::string("unknown reduction op '") + optarg + "' for -o");
        break;
      }
      case 'd': {
        ncclDataType_t t;
        if (std::string(optarg) == "all")
          o.types = allTypes();
        else if (parseType(optarg, &t))
          o.types = {t};
        else
          usageError(std::string("unknown datatype '") + optarg + "' for -d");
        break;
      }
      case 'h':
        if (!quiet) printUsage(stdout);
        std::exit(0);
      case ':': usageError("option " + flag + " needs a value");
      default: usageError("unknown option " + flag);
    }
  }
  if (optind >= argc) usageError("missing collective");
  if (optind + 1 < argc) usageError(std::string("unexpected argument '") + argv[optind + 1] + "'");
  o.collective = argv[optind];
  if (!findCollective(o.collective)) usageError("unknown collective '" + o.collective + "'");
  o.collective = findCollective(o.collective)->name;
  if (o.minBytes > o.maxBytes) usageError("minbytes (-b) is larger than maxbytes (-e)");
  if (o.stepFactor <= 1 && o.stepBytes == 0 && o.minBytes != o.maxBytes)
    usageError("stepbytes (-i) must be positive when stepfactor (-f) is 1");
  if (o.stepFactor > 1 && o.minBytes == 0 && o.maxBytes > 0)
    usageError("minbytes (-b) must be positive with a stepfactor (-f)");
  return o;
}

}  // namespace perf
