// plexus-net-check: does an NCCL net plugin do what NCCL expects of it, and how fast is it (see README.md).
// This process runs no plugin code: each rule runs in fresh worker processes (this binary again, worker.cc),
// so a plugin that crashes or hangs fails that rule and the run goes on to the next.
#include <signal.h>

#include <cstdio>
#include <cstring>
#include <random>

#include "netcheck.h"
#include "plugin/loader.h"

using namespace netcheck;

int main(int argc, char** argv) {
  plexus::addToolPluginDir(PLEXUS_TOOL_LIBDIR);  // workers inherit PLEXUS_PLUGIN_PATH
  if (argc > 1 && !strcmp(argv[1], "--worker")) workerMain(argc, argv);
  const Options opt = parseOptions(argc, argv, 1);
  if (opt.list) {
    for (const Rule& r : rules()) printf("%-20s %s\n", r.name, r.checks);
    return 0;
  }
  signal(SIGPIPE, SIG_IGN);  // a worker gone is read as end of file
  setvbuf(stdout, nullptr, _IOLBF, 0);

  const std::vector<std::string> args(argv + 1, argv + argc);
  std::random_device rd;
  const uint64_t commId = ((uint64_t)rd() << 32) ^ rd();  // one communicator's id, as NCCL passes to init
  const size_t rows = tableSizes(opt).size();
  printf("# plexus-net-check: plugin '%s', device %d; each rule bounded by %.1f s\n", opt.plugin.c_str(), opt.device,
         opt.timeout);

  int passed = 0, skipped = 0, failed = 0;
  bool initFailed = false;
  std::string noDevice;  // --skip-without-device: why init was skipped
  auto onLine = [](const std::string& kind, const std::string& text) {
    printf(kind == "NOTE" ? "# %s\n" : "%s\n", text.c_str());
  };
  for (const Rule& r : rules()) {
    const bool isTable = !strcmp(r.name, "table");
    if (!opt.rule.empty() ? opt.rule != r.name : (isTable && !opt.table)) continue;
    Outcome o;
    if (initFailed) {
      o = {Verdict::Skip, "init failed, so nothing else can run"};
    } else if (!noDevice.empty()) {
      o = {Verdict::Skip, noDevice};
    } else {
      // Workers start and load the plugin before their own bound starts; their watchdog fires half a second after
      // it. The table bounds each size's latency, bandwidth and bidirectional phases.
      const double bound = isTable ? opt.timeout * (double)(3 * rows + 1) + 3 : opt.timeout + 3;
      o = runJob(r, args, commId, bound, onLine);
    }
    const char* kind = o.verdict == Verdict::Pass ? "PASS" : o.verdict == Verdict::Skip ? "SKIP" : "FAIL";
    printf("%s %s: %s\n", kind, r.name, o.text.c_str());
    (o.verdict == Verdict::Pass ? passed : o.verdict == Verdict::Skip ? skipped : failed)++;
    if (!strcmp(r.name, "init") && o.verdict == Verdict::Fail) initFailed = true;
    if (!strcmp(r.name, "init") && o.verdict == Verdict::Skip && opt.skipWithoutDevice) noDevice = o.text;
  }
  printf("# %d passed, %d skipped, %d failed\n", passed, skipped, failed);
  if (failed) return 1;
  return noDevice.empty() ? 0 : 77;
}
