/*
 * mpi_allreduce: the Open MPI reference for plexus-perf. Times one MPI collective on float data over
 * a range of sizes and prints plexus-perf's (nccl-tests') out-of-place columns, with the same size
 * semantics and bus-bandwidth formulas, so the two outputs line up row by row.
 *
 *   mpirun -np 4 mpi_allreduce [-C allreduce|allgather|bcast|reduce|reduce_scatter|alltoall|memprobe]
 *                              [-b minbytes] [-e maxbytes] [-i stepbytes] [-f stepfactor] [-n iters] [-w warmup]
 */
#define _POSIX_C_SOURCE 200809L

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { kAllreduce, kAllgather, kBcast, kReduce, kReduceScatter, kAlltoall, kMemProbe, kCopyProbe };

static const struct {
  const char* name;
  const char* alias; /* plexus-perf's name */
  int kind;
} kColls[] = {
    {"allreduce", "all_reduce", kAllreduce},
    {"allgather", "all_gather", kAllgather},
    {"bcast", "broadcast", kBcast},
    {"reduce", "reduce", kReduce},
    {"reduce_scatter", "reducescatter", kReduceScatter},
    {"alltoall", "all_to_all", kAlltoall},
    /* Not MPI: every rank at once reduces two arrays of the size into a third (2 reads and a write of it), the
     * memory traffic an AllReduce of 2 ranks cannot do without. Its rate bounds a host AllReduce's busbw. */
    {"memprobe", "memprobe", kMemProbe},
    /* Not MPI: every rank at once copies an array of the size into another (a read and a write of it). On one rank,
     * the memory traffic a Broadcast between two processes cannot do without, done by one core. */
    {"copyprobe", "copyprobe", kCopyProbe},
};

static float* gThird; /* memprobe's second source */

static int gRank = 0;

static void usage(FILE* out) {
  fprintf(out,
          "USAGE: mpirun -np N mpi_allreduce [options]\n"
          "  -C <collective>   allreduce|allgather|bcast|reduce|reduce_scatter|alltoall (default allreduce;\n"
          "                    memprobe: no MPI, each rank reduces two arrays of the size into a third at once;\n"
          "                    copyprobe: no MPI, each rank copies an array of the size into another at once;\n"
          "                    plexus-perf names such as all_reduce are accepted too)\n"
          "  -b <size>         smallest size, K/M/G suffixes allowed (default 32M)\n"
          "  -e <size>         largest size (default 32M)\n"
          "  -i <size>         linear increment (default 1M)\n"
          "  -f <n>            multiplicative increment, overrides -i when > 1 (default 1)\n"
          "  -n <n>            timed iterations (default 20)\n"
          "  -w <n>            warmup iterations (default 1)\n"
          "  -h                this message\n");
}

static void bad(const char* msg, const char* arg) {
  if (gRank == 0) {
    fprintf(stderr, "mpi_allreduce: %s%s%s\n\n", msg, arg ? " " : "", arg ? arg : "");
    usage(stderr);
  }
  MPI_Finalize();
  exit(2);
}

static size_t parseSize(const char* s) {
  char* end = NULL;
  double v = strtod(s, &end), unit = 1;
  if (end == s || v < 0) bad("invalid size", s);
  if (*end == 'k' || *end == 'K')
    unit = 1024.0, ++end;
  else if (*end == 'm' || *end == 'M')
    unit = 1024.0 * 1024, ++end;
  else if (*end == 'g' || *end == 'G')
    unit = 1024.0 * 1024 * 1024, ++end;
  if (*end == 'b' || *end == 'B') ++end;
  if (*end) bad("invalid size", s);
  return (size_t)(v * unit + 0.5);
}

static long parseInt(const char* s, long lo) {
  char* end = NULL;
  long v = strtol(s, &end, 0);
  if (end == s || *end || v < lo) bad("invalid number", s);
  return v;
}

/* plexus-perf's adaptive fixed-width number. */
static void fmtNum(char* buf, size_t len, double v, int width) {
  int digits = 0;
  double p;
  for (p = 1; v >= p && digits < 400; p *= 10) ++digits;
  if (digits < width - 2)
    snprintf(buf, len, "%*.2f", width, v);
  else if (digits < width - 1)
    snprintf(buf, len, "%*.1f", width, v);
  else if (digits <= width)
    snprintf(buf, len, "%*.0f", width, v);
  else
    snprintf(buf, len, "%*.1e", width, v);
}

/* Element counts for a size, as nccl-tests: chunk-based collectives use size / nranks per rank. */
static void counts(int kind, size_t count, int n, size_t* send, size_t* recv, size_t* param) {
  size_t chunk = count / (size_t)n;
  switch (kind) {
    case kAllgather: *send = chunk, *recv = chunk * n, *param = chunk; break;
    case kReduceScatter: *send = chunk * n, *recv = chunk, *param = chunk; break;
    case kAlltoall: *send = chunk * n, *recv = chunk * n, *param = chunk; break;
    default: *send = count, *recv = count, *param = count; break;
  }
}

static void runOnce(int kind, float* s, float* r, size_t param) {
  int c = (int)param; /* sizes are bounded below INT_MAX elements at startup */
  switch (kind) {
    case kAllreduce: MPI_Allreduce(s, r, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case kAllgather: MPI_Allgather(s, c, MPI_FLOAT, r, c, MPI_FLOAT, MPI_COMM_WORLD); break;
    case kBcast: MPI_Bcast(s, c, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
    case kReduce: MPI_Reduce(s, r, c, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD); break;
    case kReduceScatter: MPI_Reduce_scatter_block(s, r, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case kAlltoall: MPI_Alltoall(s, c, MPI_FLOAT, r, c, MPI_FLOAT, MPI_COMM_WORLD); break;
    case kMemProbe:
      for (size_t k = 0; k < param; ++k) r[k] = s[k] + gThird[k];
      break;
    case kCopyProbe: memcpy(r, s, param * sizeof(float)); break;
  }
}

int main(int argc, char** argv) {
  size_t minBytes = 32u << 20, maxBytes = 32u << 20, stepBytes = 1u << 20, stepFactor = 1;
  long iters = 20, warmup = 1;
  int kind = kAllreduce, nranks = 1, opt, i;
  const char* collName = "allreduce";

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &gRank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  opterr = 0;
  while ((opt = getopt(argc, argv, ":C:b:e:i:f:n:w:h")) != -1) {
    switch (opt) {
      case 'C': {
        int found = 0;
        for (i = 0; i < (int)(sizeof kColls / sizeof kColls[0]); ++i)
          if (!strcmp(optarg, kColls[i].name) || !strcmp(optarg, kColls[i].alias))
            kind = kColls[i].kind, collName = kColls[i].name, found = 1;
        if (!found) bad("unknown collective", optarg);
        break;
      }
      case 'b': minBytes = parseSize(optarg); break;
      case 'e': maxBytes = parseSize(optarg); break;
      case 'i': stepBytes = parseSize(optarg); break;
      case 'f': stepFactor = (size_t)parseInt(optarg, 1); break;
      case 'n': iters = parseInt(optarg, 1); break;
      case 'w': warmup = parseInt(optarg, 0); break;
      case 'h':
        if (gRank == 0) usage(stdout);
        MPI_Finalize();
        return 0;
      case ':': bad("missing value for option", argv[optind - 1]); break;
      default: bad("unknown option", argv[optind - 1]); break;
    }
  }
  if (optind < argc) bad("unexpected argument", argv[optind]);
  if (minBytes > maxBytes) bad("minbytes (-b) is larger than maxbytes (-e)", NULL);
  if (maxBytes / sizeof(float) > 0x7fffffff) bad("maxbytes (-e) exceeds MPI's int count", NULL);
  if (stepFactor > 1 ? minBytes == 0 : stepBytes == 0) bad("the size step does not advance", NULL);

  size_t sendMax, recvMax, paramMax;
  counts(kind, maxBytes / sizeof(float), nranks, &sendMax, &recvMax, &paramMax);
  size_t bufElems = (sendMax > recvMax ? sendMax : recvMax) + 1;
  float* sendbuf = malloc(bufElems * sizeof(float));
  float* recvbuf = malloc(bufElems * sizeof(float));
  if (!sendbuf || !recvbuf) {
    fprintf(stderr, "mpi_allreduce: out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (kind == kMemProbe && !(gThird = malloc(bufElems * sizeof(float)))) {
    fprintf(stderr, "mpi_allreduce: out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (size_t k = 0; k < bufElems; ++k) {
    sendbuf[k] = (float)(gRank + 1), recvbuf[k] = 0.0f;
    if (gThird) gThird[k] = 1.0f;
  }

  if (gRank == 0) {
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(lib, &len);
    lib[strcspn(lib, ",\n")] = '\0';
    printf("# mpi_allreduce: %s, collective %s, %d ranks, float\n", lib, collName, nranks);
    printf("# minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %ld iters: %ld\n", minBytes, maxBytes,
           stepFactor > 1 ? stepFactor : stepBytes, stepFactor > 1 ? "factor" : "bytes", warmup, iters);
    printf("#\n# %10s  %12s  %8s  %6s  %6s           out-of-place\n", "", "", "", "", "");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count", "type", "redop", "root", "time",
           "algbw", "busbw", "#wrong");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)",
           "(GB/s)", "");
    fflush(stdout);
  }

  double bwSum = 0;
  int bwCount = 0;
  for (size_t size = minBytes; size <= maxBytes;) {
    size_t send, recv, param;
    counts(kind, size / sizeof(float), nranks, &send, &recv, &param);
    for (i = 0; i < warmup; ++i) runOnce(kind, sendbuf, recvbuf, param);
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (i = 0; i < iters; ++i) runOnce(kind, sendbuf, recvbuf, param);
    double sec = (MPI_Wtime() - start) / (double)iters;
    MPI_Allreduce(MPI_IN_PLACE, &sec, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    sec /= nranks; /* mean over ranks, as plexus-perf -a 1 */

    /* algbw counts the data one rank's buffers carry; busbw scales it to per-link traffic. */
    int chunked = kind == kAllgather || kind == kReduceScatter || kind == kAlltoall;
    double factor = kind == kAllreduce ? 2.0 * (nranks - 1) / nranks : chunked ? (double)(nranks - 1) / nranks : 1.0;
    double algBw = sec > 0 ? (double)param * sizeof(float) * (chunked ? nranks : 1) / 1.0e9 / sec : 0.0;
    double busBw = algBw * factor;
    bwSum += busBw;
    ++bwCount;
    if (gRank == 0) {
      char t[32], a[32], b[32];
      fmtNum(t, sizeof t, sec * 1.0e6, 7);
      fmtNum(a, sizeof a, algBw, 6);
      fmtNum(b, sizeof b, busBw, 6);
      size_t bytes = (send > recv ? send : recv) * sizeof(float);
      int rooted = kind == kBcast || kind == kReduce;
      int reduces = kind == kAllreduce || kind == kReduce || kind == kReduceScatter;
      printf("%12zu  %12zu  %8s  %6s  %6d  %7s  %6s  %6s    N/A\n", bytes, param, "float", reduces ? "sum" : "none",
             rooted ? 0 : -1, t, a, b);
      fflush(stdout);
    }
    size_t next = stepFactor > 1 ? size * stepFactor : size + stepBytes;
    if (next <= size) break;
    size = next;
  }
  if (gRank == 0) {
    printf("# %-20s : %g \n", "Avg bus bandwidth", bwCount ? bwSum / bwCount : 0.0);
    printf("#\n");
  }
  free(sendbuf);
  free(recvbuf);
  free(gThird);
  MPI_Finalize();
  return 0;
}
