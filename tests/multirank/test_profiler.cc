// NCCL's profiler plugin ABI (v1..v6): a test profiler of each version (tests/plugins/test_profiler.cc) logs every
// call as its version received it; a known sequence of operations must produce the events NCCL's rules give for that
// version (types, parents, states, fields), every started event must stop, and a plugin that fails or is missing
// must leave the communicator working.
#include <doctest/doctest.h>
#include <nccl.h>
#include <plexus.h>
#include <plexus/profiler.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "harness.h"

namespace {

const std::string pluginDir = std::string(PLEXUS_TEST_LIB_DIR) + "/../test-plugins/";

struct Event {
  uint64_t id = 0, type = 0, parent = 0, group = 0;
  std::map<std::string, std::string> fields;  // "func" -> "AllReduce", ...
  std::vector<int> states;
  bool stopped = false;
};

struct Log {
  std::vector<std::string> inits;
  std::map<uint64_t, Event> events;
  std::vector<uint64_t> order;  // ids in start order
  int finalizes = 0;
  std::vector<const Event*> ofType(uint64_t type) const {
    std::vector<const Event*> out;
    for (uint64_t id : order)
      if (events.at(id).type == type) out.push_back(&events.at(id));
    return out;
  }
};

Log readLog(const std::string& path) {
  Log log;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::istringstream s(line);
    std::string word;
    s >> word;
    if (word == "init") {
      log.inits.push_back(line);
    } else if (word == "finalize") {
      log.finalizes++;
    } else if (word == "start") {
      Event e;
      s >> e.id;
      for (std::string key, value; s >> key >> value;) e.fields[key] = value;
      e.type = std::stoull(e.fields["type"]);
      e.parent = std::stoull(e.fields["parent"]);
      if (e.fields.count("group")) e.group = std::stoull(e.fields["group"]);
      log.order.push_back(e.id);
      log.events[e.id] = e;
    } else if (word == "stop" || word == "state") {
      uint64_t id = 0;
      s >> id;
      auto it = log.events.find(id);
      REQUIRE_MESSAGE(it != log.events.end(), "a call for an event never started: " << line);
      if (word == "stop") {
        CHECK_MESSAGE(!it->second.stopped, "stopped twice: " << line);
        it->second.stopped = true;
      } else {
        int state = 0;
        s >> state;
        it->second.states.push_back(state);
      }
    }
  }
  return log;
}

// The sequence: an AllReduce alone (an implicit group), a group of a Broadcast and an AllGather, a group of a send
// and a receive to itself; every result checked.
long runSequence(ncclComm_t comm, cudaStream_t stream) {
  long bad = 0;
  std::vector<float> a(1000, 2.0f), b(1000), g(5, 3.0f), p(7, 4.0f), q(7, 0.0f);
  bad += ncclAllReduce(a.data(), b.data(), 1000, ncclFloat32, ncclSum, comm, stream) != ncclSuccess;
  bad += ncclGroupStart() != ncclSuccess;
  bad += ncclBroadcast(a.data(), a.data(), 10, ncclFloat32, 0, comm, stream) != ncclSuccess;
  bad += ncclAllGather(g.data(), g.data(), 5, ncclFloat32, comm, stream) != ncclSuccess;
  bad += ncclGroupEnd() != ncclSuccess;
  bad += ncclGroupStart() != ncclSuccess;
  bad += ncclSend(p.data(), 7, ncclFloat32, 0, comm, stream) != ncclSuccess;
  bad += ncclRecv(q.data(), 7, ncclFloat32, 0, comm, stream) != ncclSuccess;
  bad += ncclGroupEnd() != ncclSuccess;
  bad += plexusStreamSynchronize(stream) != ncclSuccess;
  bad += b[999] != 2.0f || q[6] != 4.0f;
  return bad;
}

struct ProfilerEnv {
  std::string log;
  explicit ProfilerEnv(const std::string& plugin, const char* mask = nullptr) {
    log = std::filesystem::temp_directory_path() / ("plexus-profiler-" + std::to_string(getpid()) + ".log");
    std::filesystem::remove(log);
    setenv("NCCL_PROFILER_PLUGIN", plugin.c_str(), 1);
    setenv("TEST_PROFILER_LOG", log.c_str(), 1);
    if (mask) setenv("TEST_PROFILER_MASK", mask, 1);
    else unsetenv("TEST_PROFILER_MASK");
  }
  ~ProfilerEnv() {
    std::filesystem::remove(log);
    unsetenv("NCCL_PROFILER_PLUGIN");
    unsetenv("TEST_PROFILER_LOG");
    unsetenv("TEST_PROFILER_MASK");
  }
};

}  // namespace

TEST_CASE("profiler: every NCCL profiler ABI version (v1..v6) receives a known sequence's events as it defines them") {
  for (int v = 1; v <= 6; v++) {
    CAPTURE(v);
    ProfilerEnv env(pluginDir + "libnccl-profiler-test-v" + std::to_string(v) + ".so");
    REQUIRE(harness::runThreads(1, [](int, int, ncclComm_t comm, cudaStream_t stream) {
              return runSequence(comm, stream);
            }) == 0);
    const Log log = readLog(env.log);
    REQUIRE(log.inits.size() == 1);
    CHECK(log.inits[0].rfind("init v" + std::to_string(v), 0) == 0);
    if (v >= 4) CHECK(log.inits[0].find("rank 0 nranks 1 nnodes 1") != std::string::npos);
    CHECK(log.finalizes == 1);
    for (const auto& [id, e] : log.events) CHECK_MESSAGE(e.stopped, "event " << id << " of type " << e.type);

    const auto colls = log.ofType(ncclProfileColl), p2ps = log.ofType(ncclProfileP2p);
    const auto groups = log.ofType(ncclProfileGroup);
    REQUIRE(colls.size() == 3);
    REQUIRE(p2ps.size() == 2);
    CHECK(groups.size() == 3);  // one per launch of the communicator
    // The functions in call order, as numbers (v1) or NCCL's strings.
    const std::vector<std::string> funcs = v == 1 ? std::vector<std::string>{"4", "0", "2"}
                                                  : std::vector<std::string>{"AllReduce", "Broadcast", "AllGather"};
    for (size_t i = 0; i < 3; i++) {
      CHECK(colls[i]->fields.at("func") == funcs[i]);
      CHECK(colls[i]->fields.at("datatype") == (v == 1 ? "7" : "ncclFloat32"));
      CHECK(colls[i]->fields.at("seq") == "0");
      CHECK(colls[i]->fields.at("rank") == "0");
      const std::string proto = colls[i]->fields.at("proto");
      if (v == 1) CHECK((proto == "0" || proto == "1" || proto == "2"));
      else CHECK((proto == "LL" || proto == "LL128" || proto == "SIMPLE"));
    }
    CHECK(colls[0]->fields.at("count") == "1000");
    CHECK(p2ps[0]->fields.at("func") == (v == 1 ? "6" : "Send"));
    CHECK(p2ps[1]->fields.at("func") == (v == 1 ? "7" : "Recv"));
    CHECK(p2ps[0]->fields.at("peer") == "0");
    CHECK(p2ps[0]->fields.at("count") == "7");
    if (v <= 4) {
      // Before v5 the Group event is a Coll's or P2p's parent, and no API or launch event exists.
      for (const Event* e : colls) CHECK(log.events.at(e->parent).type == ncclProfileGroup);
      for (const Event* e : p2ps) CHECK(log.events.at(e->parent).type == ncclProfileGroup);
      for (const auto& [id, e] : log.events) CHECK(e.type < ncclProfileGroupApi);
      continue;
    }
    // v5+: GroupApi -> CollApi/P2pApi -> Coll/P2p, the Group event in parentGroup; launches under the GroupApi.
    const auto groupApis = log.ofType(ncclProfileGroupApi);
    REQUIRE(groupApis.size() == 3);
    CHECK(groupApis[0]->fields.at("depth") == "1");  // the implicit group around the lone AllReduce
    CHECK(groupApis[1]->fields.at("depth") == "2");
    for (const Event* g : groupApis) CHECK(g->states == std::vector<int>{ncclProfilerGroupStartApiStop,
                                                                          ncclProfilerGroupEndApiStart});
    const auto collApis = log.ofType(ncclProfileCollApi), p2pApis = log.ofType(ncclProfileP2pApi);
    REQUIRE(collApis.size() == 3);
    REQUIRE(p2pApis.size() == 2);
    for (size_t i = 0; i < 3; i++) {
      CHECK(colls[i]->parent == collApis[i]->id);
      CHECK(collApis[i]->fields.at("func") == funcs[i]);
      CHECK(log.events.at(collApis[i]->parent).type == ncclProfileGroupApi);
      CHECK(log.events.at(colls[i]->group).type == ncclProfileGroup);
    }
    CHECK(collApis[0]->fields.at("count") == "1000");
    for (size_t i = 0; i < 2; i++) {
      CHECK(p2ps[i]->parent == p2pApis[i]->id);
      CHECK(log.events.at(p2ps[i]->group).type == ncclProfileGroup);
    }
    const auto launches = log.ofType(ncclProfileKernelLaunch);
    CHECK(launches.size() >= 3);
    for (const Event* l : launches) CHECK(log.events.at(l->parent).type == ncclProfileGroupApi);
  }
}

TEST_CASE("profiler: the activation mask chooses the events, with their ancestors") {
  ProfilerEnv env(pluginDir + "libnccl-profiler-test-v6.so", "2");  // ncclProfileColl alone
  REQUIRE(harness::runThreads(2, [](int, int, ncclComm_t comm, cudaStream_t stream) {
            std::vector<float> a(100, 1.0f);
            long bad = ncclAllReduce(a.data(), a.data(), 100, ncclFloat32, ncclSum, comm, stream) != ncclSuccess;
            bad += plexusStreamSynchronize(stream) != ncclSuccess;
            return bad + (a[99] != 2.0f);
          }) == 0);
  const Log log = readLog(env.log);
  CHECK(log.inits.size() == 2);
  const auto colls = log.ofType(ncclProfileColl);
  REQUIRE(colls.size() == 2);  // one per rank, each with its rank
  CHECK(colls[0]->fields.at("rank") != colls[1]->fields.at("rank"));
  CHECK(log.ofType(ncclProfileCollApi).size() == 2);
  CHECK(log.ofType(ncclProfileGroupApi).size() == 2);
  CHECK(log.ofType(ncclProfileGroup).size() == 2);
  CHECK(log.ofType(ncclProfileKernelLaunch).empty());
  CHECK(log.ofType(ncclProfileP2p).empty());
}

TEST_CASE("profiler: found in the net plugin's library when no profiler library is, as NCCL 2.28+") {
  const std::string log = std::filesystem::temp_directory_path() / ("plexus-profiler-" + std::to_string(getpid()) + ".log");
  std::filesystem::remove(log);
  unsetenv("NCCL_PROFILER_PLUGIN");
  setenv("TEST_PROFILER_LOG", log.c_str(), 1);
  setenv("NCCL_NET_PLUGIN", (pluginDir + "libnccl-net-bundle.so").c_str(), 1);
  CHECK(harness::runThreads(2, [](int, int, ncclComm_t comm, cudaStream_t stream) {
          std::vector<float> a(100, 1.0f);
          long bad = ncclAllReduce(a.data(), a.data(), 100, ncclFloat32, ncclSum, comm, stream) != ncclSuccess;
          bad += plexusStreamSynchronize(stream) != ncclSuccess;
          return bad + (a[99] != 2.0f);
        }) == 0);
  unsetenv("NCCL_NET_PLUGIN");
  unsetenv("TEST_PROFILER_LOG");
  const Log got = readLog(log);
  CHECK(got.inits.size() == 2);  // the bundle's ncclProfiler_v6, one init per communicator
  CHECK(!got.events.empty());
  CHECK(got.finalizes == 2);
  std::filesystem::remove(log);
}

TEST_CASE("profiler: a profiler that fails init, is missing or is turned off leaves the communicator working") {
  auto works = [] {
    return harness::runThreads(2, [](int, int, ncclComm_t comm, cudaStream_t stream) {
      std::vector<float> a(100, 1.0f);
      long bad = ncclAllReduce(a.data(), a.data(), 100, ncclFloat32, ncclSum, comm, stream) != ncclSuccess;
      bad += plexusStreamSynchronize(stream) != ncclSuccess;
      return bad + (a[99] != 2.0f);
    });
  };
  {
    ProfilerEnv env(pluginDir + "libnccl-profiler-test-v6.so");
    setenv("TEST_PROFILER_INIT_FAIL", "1", 1);
    CHECK(works() == 0);
    unsetenv("TEST_PROFILER_INIT_FAIL");
    const Log log = readLog(env.log);
    CHECK(log.inits.size() == 2);  // init was called, failed, and nothing else was
    CHECK(log.events.empty());
    CHECK(log.finalizes == 0);
  }
  {
    ProfilerEnv env("none");
    CHECK(works() == 0);
  }
  {
    ProfilerEnv env(pluginDir + "libnccl-profiler-does-not-exist.so");
    CHECK(works() == 0);
  }
  {
    // A failed load is remembered for what was asked only: a plugin named after it loads.
    ProfilerEnv env(pluginDir + "libnccl-profiler-test-v6.so");
    CHECK(works() == 0);
    const Log log = readLog(env.log);
    CHECK(log.inits.size() == 2);
    CHECK(!log.events.empty());
    CHECK(log.finalizes == 2);
  }
}

namespace {

// Two processes as two "nodes": their traffic crosses the net transport (the field plugin of tests/plugins, whose
// prof-callback quirk hangs a NetPlugin event off every isend and irecv, as a socket net built with NCCL's
// NET_PROFILER does), an AllReduce of many steps, then a send and a receive each way.
const harness::Scenario kAcrossNodes("profiler/across-nodes", [](int rank, int, ncclComm_t comm, cudaStream_t stream) {
  std::vector<float> a(1 << 18, 1.0f + (float)rank), s(1000, (float)rank), r(1000, -1.0f);
  long bad = ncclAllReduce(a.data(), a.data(), a.size(), ncclFloat32, ncclSum, comm, stream) != ncclSuccess;
  bad += ncclGroupStart() != ncclSuccess;
  bad += ncclSend(s.data(), s.size(), ncclFloat32, 1 - rank, comm, stream) != ncclSuccess;
  bad += ncclRecv(r.data(), r.size(), ncclFloat32, 1 - rank, comm, stream) != ncclSuccess;
  bad += ncclGroupEnd() != ncclSuccess;
  bad += plexusStreamSynchronize(stream) != ncclSuccess;
  return bad + (a[12345] != 3.0f) + (r[999] != (float)(1 - rank));
});

}  // namespace

TEST_CASE("profiler: across nodes, the proxy's ProxyOp/ProxyStep events and the net plugin's NetPlugin events nest "
          "under each operation") {
  const std::string field = pluginDir + "libnccl-net-field-v12.so";
  for (int v : {1, 4, 6}) {
    CAPTURE(v);
    const std::string prefix = "plexus-profiler-" + std::to_string(getpid()) + "-v" + std::to_string(v) + "-";
    const auto tmp = std::filesystem::temp_directory_path();
    ProfilerEnv env(pluginDir + "libnccl-profiler-test-v" + std::to_string(v) + ".so");
    setenv("TEST_PROFILER_LOG", (tmp / (prefix + "%p.log")).c_str(), 1);
    setenv("NCCL_NET_PLUGIN", field.c_str(), 1);
    setenv("FIELD_QUIRKS", "prof-callback", 1);
    const int failed = harness::runProcesses("profiler/across-nodes", 2, 120, 1);
    unsetenv("NCCL_NET_PLUGIN");
    unsetenv("FIELD_QUIRKS");
    REQUIRE(failed == 0);
    std::vector<std::string> logs;
    for (const auto& f : std::filesystem::directory_iterator(tmp))
      if (f.path().filename().string().rfind(prefix, 0) == 0) logs.push_back(f.path());
    REQUIRE(logs.size() == 2);  // one per process
    for (const std::string& path : logs) {
      CAPTURE(path);
      const Log log = readLog(path);
      std::filesystem::remove(path);
      for (const auto& [id, e] : log.events) CHECK_MESSAGE(e.stopped, "event " << id << " of type " << e.type);
      const auto ops = log.ofType(ncclProfileProxyOp), steps = log.ofType(ncclProfileProxyStep);
      // The AllReduce's send and receive on the connection between the nodes, and the send and the receive.
      std::map<std::string, int> opsOf;  // "AllReduce send 1" -> ops
      std::map<uint64_t, std::vector<const Event*>> stepsOf;
      for (const Event* s : steps) {
        REQUIRE(log.events.count(s->parent));
        CHECK(log.events.at(s->parent).type == ncclProfileProxyOp);
        stepsOf[s->parent].push_back(s);
      }
      for (const Event* op : ops) {
        REQUIRE(log.events.count(op->parent));
        const Event& parent = log.events.at(op->parent);
        CHECK((parent.type == ncclProfileColl || parent.type == ncclProfileP2p));
        CHECK(op->fields.at("peer") == (op->fields.at("rank") == "0" ? "1" : "0"));
        opsOf[parent.fields.at("func") + " send " + op->fields.at("send")]++;
        // Its steps, numbered from 0 in order, each in the states of its direction (v1..v6 all take 8..12).
        const auto& mine = stepsOf[op->id];
        CHECK(!mine.empty());
        for (size_t i = 0; i < mine.size(); i++) {
          CHECK(mine[i]->fields.at("step") == std::to_string(i));
          const std::vector<int> want = op->fields.at("send") == "1"
                                            ? std::vector<int>{ncclProfilerProxyStepSendWait}
                                            : std::vector<int>{ncclProfilerProxyStepRecvWait,
                                                               ncclProfilerProxyStepRecvGPUWait};
          CHECK(mine[i]->states == want);
        }
      }
      const std::string allReduce = v == 1 ? "4" : "AllReduce", send = v == 1 ? "6" : "Send",
                        recv = v == 1 ? "7" : "Recv";
      CHECK(opsOf[allReduce + " send 1"] >= 1);
      CHECK(opsOf[allReduce + " send 0"] >= 1);
      CHECK(opsOf[send + " send 1"] >= 1);
      CHECK(opsOf[recv + " send 0"] >= 1);
      CHECK(opsOf[send + " send 0"] == 0);
      // NetPlugin (v3+): one per isend and irecv, under its step, with the socket net's plugin id.
      const auto nets = log.ofType(ncclProfileNetPlugin);
      if (v >= 3) {
        CHECK(nets.size() == steps.size());
        for (const Event* n : nets) {
          REQUIRE(log.events.count(n->parent));
          CHECK(log.events.at(n->parent).type == ncclProfileProxyStep);
          CHECK(n->fields.at("id") == std::to_string((2 << 16) | 1));
          CHECK(n->states == std::vector<int>{ncclProfilerNetPluginUpdate});
        }
      } else {
        CHECK(nets.empty());
      }
      // ProxyCtrl: the proxy's sleeps, Sleep then Wakeup, when it slept at all.
      for (const Event* c : log.ofType(ncclProfileProxyCtrl))
        CHECK(c->states == std::vector<int>{ncclProfilerProxyCtrlSleep, ncclProfilerProxyCtrlWakeup});
    }
  }
}
