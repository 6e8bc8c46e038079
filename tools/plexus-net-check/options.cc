// Command line of plexus-net-check. Workers parse the same arguments as the orchestrator that ran them.
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "netcheck.h"

namespace netcheck {

void usage(int code) {
  fprintf(code ? stderr : stdout,
          "usage: plexus-net-check <plugin> [-d DEV] [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP]\n"
          "                        [-t SECONDS] [-r RULE] [--no-table] [--skip-without-device] | --list | --help\n");
  if (code) exit(code);
  printf(
      "Checks an NCCL net plugin against the contract NCCL relies on, one line per rule (PASS, FAIL or SKIP),\n"
      "then measures latency, one-way and bidirectional bandwidth between two processes over the plugin's device.\n"
      "  <plugin>          a .so path; a name as NCCL_NET_PLUGIN takes it (tried as given, then as\n"
      "                    libnccl-net-<name>.so); or socket, the built-in socket net\n"
      "  -d, --device N    the plugin's device to use (default 0)\n"
      "  -b, --minbytes S  smallest message of the table (default 8; K, M, G suffixes)\n"
      "  -e, --maxbytes S  largest message of the table (default 64M)\n"
      "  -f, --stepfactor F  size multiplier from one row to the next (default 4)\n"
      "  -n, --iters N     timed iterations per size (default 20; small sizes run more for bandwidth)\n"
      "  -w, --warmup N    untimed iterations per size (default 5)\n"
      "  -t, --timeout S   bound of each rule in seconds, and of each size of the table (default 5)\n"
      "  -r, --rule NAME   run this rule alone (table: the table alone)\n"
      "      --no-table    rules only\n"
      "      --skip-without-device  a plugin that reports no device here (an RDMA plugin on a machine without the\n"
      "                    hardware) is reported SKIP on every rule with the plugin's own reason, exit code 77\n"
      "      --list        the rules and what each checks\n"
      "Exit code: 0 when every rule passed or was skipped, 1 when one failed, 2 for bad arguments,\n"
      "77 with --skip-without-device when the plugin has no device.\n");
  exit(0);
}

namespace {

[[noreturn]] void bad(const char* flag, const char* value, const char* expected) {
  fprintf(stderr, "plexus-net-check: %s needs %s, not '%s'\n", flag, expected, value ? value : "(nothing)");
  usage(2);
}

long long parseInteger(const char* flag, const char* v, long long lo, long long hi) {
  char* end = nullptr;
  errno = 0;
  long long n = v ? strtoll(v, &end, 10) : 0;
  if (!v || !*v || *end || errno || n < lo || n > hi) {
    char expected[96];
    snprintf(expected, sizeof expected, "an integer in [%lld, %lld]", lo, hi);
    bad(flag, v, expected);
  }
  return n;
}

size_t parseBytes(const char* flag, const char* v) {
  char* end = nullptr;
  errno = 0;
  unsigned long long n = v && *v != '-' ? strtoull(v, &end, 10) : 0;
  if (!v || end == v || errno) bad(flag, v, "a size in bytes (8, 64K, 4M, 1G)");
  unsigned shift = 0;
  if (*end == 'K' || *end == 'k')
    shift = 10, end++;
  else if (*end == 'M' || *end == 'm')
    shift = 20, end++;
  else if (*end == 'G' || *end == 'g')
    shift = 30, end++;
  if (*end == 'B' || *end == 'b') end++;
  if (*end || n > (1ull << 30) >> shift || (n << shift) > (1ull << 30))
    bad(flag, v, "a size in bytes up to 1G (8, 64K, 4M, 1G)");
  return (size_t)(n << shift);
}

}  // namespace

Options parseOptions(int argc, char** argv, int first) {
  Options o;
  for (int i = first; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    auto is = [&](const char* shortFlag, const char* longFlag) {
      return (shortFlag && !strcmp(a, shortFlag)) || !strcmp(a, longFlag);
    };
    if (is("-h", "--help"))
      usage(0);
    else if (is(nullptr, "--list"))
      o.list = true;
    else if (is(nullptr, "--no-table"))
      o.table = false;
    else if (is(nullptr, "--skip-without-device"))
      o.skipWithoutDevice = true;
    else if (is("-d", "--device"))
      o.device = (int)parseInteger(a, v, 0, INT_MAX), i++;
    else if (is("-b", "--minbytes"))
      o.minBytes = parseBytes(a, v), i++;
    else if (is("-e", "--maxbytes"))
      o.maxBytes = parseBytes(a, v), i++;
    else if (is("-f", "--stepfactor"))
      o.stepFactor = (int)parseInteger(a, v, 2, 1024), i++;
    else if (is("-n", "--iters"))
      o.iters = (int)parseInteger(a, v, 1, 1000000), i++;
    else if (is("-w", "--warmup"))
      o.warmup = (int)parseInteger(a, v, 0, 1000000), i++;
    else if (is("-t", "--timeout")) {
      char* end = nullptr;
      o.timeout = v ? strtod(v, &end) : 0;
      if (!v || *end || !std::isfinite(o.timeout) || o.timeout < 0.1 || o.timeout > 3600)
        bad(a, v, "a number of seconds in [0.1, 3600]");
      i++;
    } else if (is("-r", "--rule")) {
      if (!v || !findRule(v)) {
        fprintf(stderr, "plexus-net-check: --rule needs one of:");
        for (const Rule& r : rules()) fprintf(stderr, " %s", r.name);
        fprintf(stderr, "; not '%s'\n", v ? v : "(nothing)");
        usage(2);
      }
      o.rule = v, i++;
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "plexus-net-check: unknown option '%s'\n", a);
      usage(2);
    } else if (o.plugin.empty()) {
      o.plugin = a;
    } else {
      fprintf(stderr, "plexus-net-check: one plugin at a time: '%s', then '%s'\n", o.plugin.c_str(), a);
      usage(2);
    }
  }
  if (o.plugin.empty() && !o.list) {
    fprintf(stderr, "plexus-net-check: which plugin? (a .so path, a name, or socket)\n");
    usage(2);
  }
  if (o.minBytes == 0 || o.minBytes > o.maxBytes) {
    fprintf(stderr, "plexus-net-check: the table's sizes need 0 < --minbytes <= --maxbytes (%zu, %zu)\n", o.minBytes,
            o.maxBytes);
    usage(2);
  }
  return o;
}

std::string bytesText(size_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (u < 3 && b >= 1024 && b % 1024 == 0) b /= 1024, u++;
  return std::to_string(b) + " " + units[u];
}

}  // namespace netcheck
