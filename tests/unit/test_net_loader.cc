// Net plugins through the core's loader: each ABI version v6..v12 loads through its adapter and carries
// data (connect/accept, isend/irecv, properties widened to v12's), NULL optional members are tolerated,
// defective plugins are refused with one line naming the file, the symbols found and why, and the choice
// among candidates follows NCCL's rules (NCCL_NET_PLUGIN order, NCCL_NET by name, a plugin whose init
// fails or that has no device skipped, the built-in socket net last).
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "misc/debug.h"
#include "plugin/net.h"

using namespace plexus;

namespace {

std::string testPlugin(const std::string& name) {
  const char* lib = getenv("PLEXUS_TEST_LIB_DIR");
  REQUIRE(lib != nullptr);
  return std::string(lib) + "/../test-plugins/libnccl-net-" + name + ".so";
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// One message each way of a connection made through api (the listen side polls accept while the connect
// side polls connect, as the proxy does), checked byte by byte.
void roundTrip(NetApi& api, void* ctx, size_t bytes) {
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* listenComm = nullptr;
  REQUIRE(api.listen(ctx, 0, handle, &listenComm) == ncclSuccess);
  REQUIRE(listenComm != nullptr);
  void *sendComm = nullptr, *recvComm = nullptr;
  for (int i = 0; i < 100000 && (!sendComm || !recvComm); i++) {
    if (!sendComm) REQUIRE(api.connect(ctx, 0, handle, &sendComm) == ncclSuccess);
    if (!recvComm) REQUIRE(api.accept(listenComm, &recvComm) == ncclSuccess);
    if (!sendComm || !recvComm) std::this_thread::yield();
  }
  REQUIRE((sendComm && recvComm));
  std::vector<char> out(bytes), in(bytes + 16, 0);
  for (size_t i = 0; i < bytes; i++) out[i] = (char)(i * 7 + 3);
  void *smh = nullptr, *rmh = nullptr;
  REQUIRE(api.regMr(sendComm, out.data(), bytes, NCCL_PTR_HOST, &smh) == ncclSuccess);
  REQUIRE(api.regMr(recvComm, in.data(), in.size(), NCCL_PTR_HOST, &rmh) == ncclSuccess);
  void *sreq = nullptr, *rreq = nullptr;
  void* data = in.data();
  size_t size = in.size();
  int tag = 5;
  for (int i = 0; i < 100000 && !rreq; i++) REQUIRE(api.irecv(recvComm, 1, &data, &size, &tag, &rmh, nullptr, &rreq) == ncclSuccess);
  for (int i = 0; i < 100000 && !sreq; i++) REQUIRE(api.isend(sendComm, out.data(), bytes, 5, smh, nullptr, &sreq) == ncclSuccess);
  REQUIRE((sreq && rreq));
  int sdone = 0, rdone = 0, ssize = -1, rsize = -1;
  for (int i = 0; i < 10000000 && !(sdone && rdone); i++) {
    if (!sdone) REQUIRE(api.test(sreq, &sdone, &ssize) == ncclSuccess);
    if (!rdone) REQUIRE(api.test(rreq, &rdone, &rsize) == ncclSuccess);
  }
  REQUIRE((sdone && rdone));
  CHECK(rsize == (int)bytes);
  CHECK(std::equal(out.begin(), out.end(), in.begin()));
  CHECK(api.deregMr(sendComm, smh) == ncclSuccess);
  CHECK(api.deregMr(recvComm, rmh) == ncclSuccess);
  CHECK(api.closeSend(sendComm) == ncclSuccess);
  CHECK(api.closeRecv(recvComm) == ncclSuccess);
  CHECK(api.closeListen(listenComm) == ncclSuccess);
}

}  // namespace

TEST_CASE("net loader: each ABI version v6..v12 loads through its adapter and carries data") {
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  for (int v = 6; v <= 12; v++) {
    CAPTURE(v);
    std::string report;
    const NetPlugin* p = netPluginOpen(testPlugin("test-v" + std::to_string(v)), &report);
    REQUIRE_MESSAGE(p != nullptr, report);
    CHECK(p->version == v);
    CHECK(p->name == "test-v" + std::to_string(v));
    CHECK(has(report, "loaded"));
    CHECK(has(report, "ncclNetPlugin_v" + std::to_string(v)));
    void* ctx = nullptr;
    ncclNetCommConfig_v12_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
    REQUIRE(p->api->init(&ctx, 42, &config, debugLog) == ncclSuccess);
    int ndev = 0;
    REQUIRE(p->api->devices(&ndev) == ncclSuccess);
    REQUIRE(ndev >= 1);
    ncclNetProperties_v12_t props;
    REQUIRE(p->api->getProperties(0, &props) == ncclSuccess);
    CHECK((props.ptrSupport & NCCL_PTR_HOST) != 0);
    CHECK(props.maxRecvs >= 1);
    CHECK(props.railId == NCCL_NET_ID_UNDEF);
    // Int-size plugins are told to keep transfers within what an int holds.
    CHECK(props.maxP2pBytes == (v <= 8 ? (size_t)MAX_NET_SIZE : (size_t)NCCL_MAX_NET_SIZE_BYTES));
    roundTrip(*p->api, ctx, 1 << 20);
    roundTrip(*p->api, ctx, 0);
    CHECK(p->api->finalize(ctx) == ncclSuccess);
    // The same spec again is the same plugin, not a second load.
    CHECK(netPluginOpen(testPlugin("test-v" + std::to_string(v)), nullptr) == p);
  }
}

TEST_CASE("net loader: NULL optional members are tolerated") {
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  std::string report;
  const NetPlugin* p = netPluginOpen(testPlugin("test-nulloptional"), &report);
  REQUIRE_MESSAGE(p != nullptr, report);
  CHECK_FALSE(p->api->hasIrecvConsumed());
  void* ctx = nullptr;
  REQUIRE(p->api->init(&ctx, 1, nullptr, debugLog) == ncclSuccess);
  roundTrip(*p->api, ctx, 4099);
  CHECK(p->api->finalize(ctx) == ncclSuccess);
}

TEST_CASE("net loader: a defective plugin is refused with one line naming file, symbols and reason") {
  std::string report;
  CHECK(netPluginOpen(testPlugin("bad-nosymbol"), &report) == nullptr);
  CHECK(has(report, "libnccl-net-bad-nosymbol.so"));
  CHECK(has(report, "looked for ncclNetPlugin_v12 down to _v6, found none; it exports none of them"));

  CHECK(netPluginOpen(testPlugin("bad-newer"), &report) == nullptr);
  CHECK(has(report, "it exports only ncclNetPlugin_v13, newer than this Plexus knows (v12)"));

  CHECK(netPluginOpen(testPlugin("bad-nullmember"), &report) == nullptr);
  CHECK(has(report, "found v12; ncclNetPlugin_v12's isend is NULL"));

  CHECK(netPluginOpen("no-such-net", &report) == nullptr);
  CHECK(has(report, "net plugin 'no-such-net': not loaded: tried no-such-net, libnccl-net-no-such-net.so"));
}

TEST_CASE("net loader: the choice follows NCCL_NET_PLUGIN's order, skips what fails, and honours NCCL_NET") {
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  const ncclNetCommConfig_v12_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
  const NetPlugin* p = nullptr;
  void* ctx = nullptr;
  std::string report;
  // No device and a failing init are skipped, each with its line; the next candidate is chosen.
  const std::string list = testPlugin("bad-nodevs") + "," + testPlugin("bad-init") + "," + testPlugin("test-v8") +
                           "," + testPlugin("test-v11");
  REQUIRE(netPluginChoose(list, "", 7, config, debugLog, &p, &ctx, &report) == ncclSuccess);
  CHECK(p->name == "test-v8");
  CHECK(has(report, "net plugin bad-nodevs (" + testPlugin("bad-nodevs") + ", v12): skipped, it has no device"));
  CHECK(has(report, "skipped, its init failed with"));
  p->api->finalize(ctx);
  // NCCL_NET picks by the table's name, case-insensitively.
  REQUIRE(netPluginChoose(list, "TEST-V11", 7, config, debugLog, &p, &ctx, &report) == ncclSuccess);
  CHECK(p->name == "test-v11");
  CHECK(has(report, "test-v8 (" + testPlugin("test-v8") + ", v8): skipped, NCCL_NET=TEST-V11 asks for another"));
  p->api->finalize(ctx);
  // "none": only the built-in socket net.
  REQUIRE(netPluginChoose("none", "", 7, config, debugLog, &p, &ctx, &report) == ncclSuccess);
  CHECK(p->path == "built-in");
  CHECK(p->name == "Socket");
  p->api->finalize(ctx);
  // A plugin without devices: the socket net carries the traffic, and one line says so, with its interface.
  REQUIRE(netPluginChoose(testPlugin("bad-nodevs"), "", 7, config, debugLog, &p, &ctx, &report) == ncclSuccess);
  CHECK(p->path == "built-in");
  CHECK(has(report, "net: falling back to the built-in socket net on interface lo (1 device(s)): net plugin bad-nodevs"));
  p->api->finalize(ctx);
  // net-ib on a machine without an HCA: skipped with its reason, and the fallback line names it.
  const std::string ib = std::string(PLEXUS_TEST_PLUGIN_DIR) + "/libnccl-net-ib.so";
  if (access(ib.c_str(), R_OK) == 0 && system("ls /sys/class/infiniband/* >/dev/null 2>&1") != 0) {
    REQUIRE(netPluginChoose(ib, "", 7, config, debugLog, &p, &ctx, &report) == ncclSuccess);
    CHECK(p->path == "built-in");
    CHECK(has(report, "net: falling back to the built-in socket net on interface lo (1 device(s)): net plugin IB"));
    CHECK(has(report, "skipped, it has no device"));
    p->api->finalize(ctx);
  } else {
    MESSAGE("net-ib's fallback not checked: ", access(ib.c_str(), R_OK) ? "it was not built" : "this machine has an HCA");
  }
  // Nothing left: an error that names each candidate and why it was skipped.
  CHECK(netPluginChoose(testPlugin("bad-nodevs"), "nosuch", 7, config, debugLog, &p, &ctx, &report) ==
        ncclSystemError);
}
