// Layer 6: the physical topology from hwloc (core/src/topo/hw_topo.h), on the server topologies of tests/topo/
// (written by tests/topo/make_topologies.py, whose header says what each holds) and on this machine. Expected
// path types come from those layouts as NCCL defines them, not from the code under test.
#include <doctest/doctest.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "skip.h"
#include "topo/hw_topo.h"

using namespace plexus;

namespace {

std::unique_ptr<HwTopology> loadTopo(const std::string& name) {
  std::string error;
  auto t = HwTopology::load(std::string(PLEXUS_TEST_TOPO_DIR) + "/" + name, &error);
  INFO(error);
  REQUIRE(t);
  return t;
}

const HwDevice& nic(const HwTopology& t, const std::string& name) {
  for (const HwDevice& d : t.nics())
    if (d.name == name) return d;
  FAIL("no NIC " << name);
  return t.nics()[0];
}

std::vector<std::string> busIds(const HwTopology& t) {
  std::vector<std::string> ids;
  for (const HwDevice& d : t.nics()) ids.push_back(d.busId);
  return ids;
}

}  // namespace

#ifdef PLEXUS_HAVE_HWLOC
#define NEEDS_HWLOC()
#else
#define NEEDS_HWLOC() return testskip::skip("Plexus was built without hwloc (libhwloc-dev)")
#endif

TEST_CASE("hw topology: an 8-GPU, 4-NIC, 2-socket server: devices, CPUs, path types") {
  NEEDS_HWLOC();
  auto t = loadTopo("server-8gpu-4nic.xml");
  CHECK(t->packages() == 2);
  CHECK(t->numaNodes() == 2);
  CHECK(t->cores() == 32);
  REQUIRE(t->gpus().size() == 8);
  REQUIRE(t->nics().size() == 4);
  // Bus order; each switch k (bus 0x10 + 0x20k) holds GPUs at +3 and +4 and NIC mlx5_k at +5.
  CHECK(t->gpus()[0].busId == "0000:13:00.0");
  CHECK(t->gpus()[7].busId == "0000:74:00.0");
  CHECK(nic(*t, "mlx5_2").busId == "0000:55:00.0");
  CHECK(nic(*t, "mlx5_2").netdev == "ib2");
  CHECK(t->gpus()[0].cpus == "0-15");
  CHECK(t->gpus()[5].cpus == "16-31");
  CHECK(t->gpus()[5].numa == 1);
  CHECK(t->gpus()[0].linkGBs > 60);
  const HwDevice& g0 = t->gpus()[0];
  CHECK(t->path(g0, g0) == PathType::LOC);
  CHECK(t->path(g0, t->gpus()[1]) == PathType::PIX);  // the same switch
  CHECK(t->path(g0, nic(*t, "mlx5_0")) == PathType::PIX);
  CHECK(t->path(g0, nic(*t, "mlx5_1")) == PathType::PHB);  // socket 0's other host bridge
  CHECK(t->path(g0, t->gpus()[2]) == PathType::PHB);
  CHECK(t->path(g0, nic(*t, "mlx5_2")) == PathType::SYS);  // socket 1
  CHECK(t->path(t->gpus()[7], nic(*t, "mlx5_3")) == PathType::PIX);
  CHECK(t->pathGBs(g0, nic(*t, "mlx5_0")) > 60);
  CHECK(t->pathGBs(g0, nic(*t, "mlx5_2")) <= 10);
}

TEST_CASE("hw topology: NVLink from the topology's NVLinkBandwidth matrix: direct links and an NVSwitch") {
  NEEDS_HWLOC();
  // make_topologies.py: GPU0..3 linked pairwise at 100 GB/s, GPU4..7 each at 450 GB/s to an NVSwitch.
  auto t = loadTopo("server-8gpu-nvlink.xml");
  REQUIRE(t->gpus().size() == 8);
  const auto& g = t->gpus();
  CHECK(t->nvlinkSource() == "hwloc NVLinkBandwidth");
  CHECK(t->path(g[0], g[1]) == PathType::NVL);  // PIX over PCIe, NVLink beside it
  CHECK(t->path(g[0], g[3]) == PathType::NVL);  // PHB over PCIe
  CHECK(t->pathGBs(g[0], g[3]) == doctest::Approx(100));
  CHECK(t->path(g[4], g[7]) == PathType::NVL);  // through the switch
  CHECK(t->pathGBs(g[5], g[6]) == doctest::Approx(450));
  CHECK(t->path(g[3], g[4]) == PathType::SYS);  // no NVLink between the groups: PCIe across the sockets
  CHECK(t->nvlinkGBs(g[3], g[4]) == 0);
  CHECK(t->nvlinkGBs(g[0], g[0]) == 0);
  CHECK(t->path(g[0], nic(*t, "mlx5_0")) == PathType::PIX);  // NICs are not on NVLink
  // The file without the matrix: no NVLink at all.
  auto plain = loadTopo("server-8gpu-4nic.xml");
  CHECK(plain->nvlinkSource().empty());
  CHECK(plain->path(plain->gpus()[0], plain->gpus()[1]) == PathType::PIX);
  // plexus-info's tree names the links.
  CHECK(t->tree().find("GPU0 0000:13:00.0 (NVIDIA GPU); NVLink to GPU1 100 GB/s, GPU2 100 GB/s, GPU3 100 GB/s") !=
        std::string::npos);
  CHECK(t->tree().find("GPU7 0000:74:00.0 (NVIDIA GPU); NVLink to GPU4 450 GB/s, GPU5 450 GB/s, GPU6 450 GB/s") !=
        std::string::npos);
}

TEST_CASE("hw topology: each GPU of the 8-GPU server uses the NIC behind its own switch first") {
  NEEDS_HWLOC();
  auto t = loadTopo("server-8gpu-4nic.xml");
  const std::vector<std::string> ids = busIds(*t);
  const std::vector<bool> usable(ids.size(), true);
  for (size_t g = 0; g < t->gpus().size(); g++) {
    int nearest = 0;
    std::string why;
    const std::vector<int> order = netDeviceOrder(t.get(), ids, usable, t->gpus()[g].busId, "", &nearest, &why);
    INFO("GPU " << g << "\n" << why);
    REQUIRE(order.size() == 4);
    CHECK(nearest == 1);
    CHECK(t->nics()[order[0]].name == "mlx5_" + std::to_string(g / 2));
    // Then the socket's other NIC (PHB), then the other socket's two (SYS).
    CHECK(t->nics()[order[1]].name == "mlx5_" + std::to_string(g / 4 * 2 + (g / 2 + 1) % 2));
    CHECK(t->path(t->gpus()[g], t->nics()[order[2]]) == PathType::SYS);
  }
}

TEST_CASE("hw topology: nested switches are PXB, a NIC behind another host bridge of the socket is PHB") {
  NEEDS_HWLOC();
  auto t = loadTopo("server-mixed.xml");
  REQUIRE(t->gpus().size() == 2);
  REQUIRE(t->nics().size() == 3);
  const HwDevice &g0 = t->gpus()[0], &g1 = t->gpus()[1];
  CHECK(t->path(g0, g1) == PathType::PXB);
  CHECK(t->path(g0, nic(*t, "mlx5_0")) == PathType::PHB);
  CHECK(t->path(g1, nic(*t, "mlx5_0")) == PathType::PHB);
  CHECK(t->path(g0, nic(*t, "mlx5_1")) == PathType::SYS);
  CHECK(t->path(g0, nic(*t, "eth2")) == PathType::SYS);
  CHECK(nic(*t, "eth2").netdev == "eth2");
  // Both SYS NICs come after mlx5_0 (the CPUs' interconnect bounds them alike), in bus order.
  const std::vector<std::string> ids = busIds(*t);
  int nearest = 0;
  const std::vector<int> order =
      netDeviceOrder(t.get(), ids, std::vector<bool>(ids.size(), true), g1.busId, "", &nearest, nullptr);
  REQUIRE(order.size() == 3);
  CHECK(nearest == 1);
  CHECK(t->nics()[order[0]].name == "mlx5_0");
  CHECK(t->nics()[order[1]].name == "mlx5_1");
  CHECK(t->nics()[order[2]].name == "eth2");
}

TEST_CASE("hw topology: without a GPU, a rank's CPUs choose the NIC of their NUMA node") {
  NEEDS_HWLOC();
  auto t = loadTopo("host-2numa-2nic.xml");
  CHECK(t->gpus().empty());
  REQUIRE(t->nics().size() == 2);
  CHECK(t->pathFromCpus(nic(*t, "ens1"), "0-3") == PathType::PHB);
  CHECK(t->pathFromCpus(nic(*t, "ens2"), "0-3") == PathType::SYS);
  const std::vector<std::string> ids = busIds(*t);
  const std::vector<bool> usable(ids.size(), true);
  int nearest = 0;
  std::vector<int> order = netDeviceOrder(t.get(), ids, usable, "", "4-7", &nearest, nullptr);
  CHECK(nearest == 1);
  CHECK(t->nics()[order[0]].name == "ens2");
  // CPUs on both sockets (an unbound process): both NICs are equally near, to be spread over.
  order = netDeviceOrder(t.get(), ids, usable, "", "0-7", &nearest, nullptr);
  CHECK(nearest == 2);
}

TEST_CASE("hw topology: a device whose getProperties failed is never chosen, unknown ones come last") {
  NEEDS_HWLOC();
  auto t = loadTopo("server-8gpu-4nic.xml");
  std::vector<std::string> ids = busIds(*t);
  ids.push_back("0000:ee:00.0");  // a device the topology does not hold
  ids.push_back("");              // a plugin that gives no pciPath
  std::vector<bool> usable(ids.size(), true);
  usable[0] = false;  // GPU0's own NIC
  int nearest = 0;
  std::string why;
  const std::vector<int> order = netDeviceOrder(t.get(), ids, usable, t->gpus()[0].busId, "", &nearest, &why);
  INFO(why);
  REQUIRE(order.size() == 5);
  for (int d : order) CHECK(d != 0);
  CHECK(order[0] == 1);  // the socket's other NIC, PHB
  CHECK(order[3] == 4);
  CHECK(order[4] == 5);
  CHECK(why.find("device 0: not used (its getProperties failed)") != std::string::npos);
  // Without a topology: plugin order, the failed device left out, all equally near.
  const std::vector<int> plain = netDeviceOrder(nullptr, ids, usable, "", "", &nearest, nullptr);
  CHECK(plain == std::vector<int>{1, 2, 3, 4, 5});
  CHECK(nearest == 5);
}

TEST_CASE("hw topology: the topology in use is written back as XML that loads to the same machine") {
  NEEDS_HWLOC();
  auto t = loadTopo("server-mixed.xml");
  char path[] = "/tmp/plexus-topo-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  std::string error;
  REQUIRE(t->writeXml(path, &error));
  auto again = HwTopology::load(path, &error);
  unlink(path);
  REQUIRE(again);
  REQUIRE(again->gpus().size() == t->gpus().size());
  REQUIRE(again->nics().size() == t->nics().size());
  for (size_t i = 0; i < t->nics().size(); i++) CHECK(again->nics()[i].busId == t->nics()[i].busId);
  CHECK(again->path(again->gpus()[0], again->gpus()[1]) == PathType::PXB);
}

TEST_CASE("hw topology: a missing or broken topology file is an error that names the file") {
  NEEDS_HWLOC();
  std::string error;
  CHECK(!HwTopology::load("/nonexistent/topo.xml", &error));
  CHECK(error.find("/nonexistent/topo.xml") != std::string::npos);
  char path[] = "/tmp/plexus-topo-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  const char junk[] = "<topology><object type=\"Machine\"";
  REQUIRE(write(fd, junk, sizeof junk - 1) == (ssize_t)(sizeof junk - 1));
  close(fd);
  error.clear();
  CHECK(!HwTopology::load(path, &error));
  unlink(path);
  INFO(error);
  CHECK(error.find(path) != std::string::npos);
  CHECK(error.find("hwloc XML") != std::string::npos);
}

TEST_CASE("hw topology: this machine, live: the CPUs this process may use are its affinity's") {
  NEEDS_HWLOC();
  // The process's own (this binary sets no NCCL_TOPO_FILE): loaded once and kept, as communicators use it.
  REQUIRE(!getenv("NCCL_TOPO_FILE"));
  std::string error;
  const HwTopology* t = HwTopology::process(&error);
  INFO(error);
  REQUIRE(t);
  CHECK(t->source() == "live");
  CHECK(t->packages() >= 1);
  CHECK(t->cores() >= 1);
  cpu_set_t set;
  REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
  CHECK(t->usableCpus() == CPU_COUNT(&set));
  CHECK(!t->tree().empty());
}

TEST_CASE("hw topology: bus ids from the forms plugins and drivers spell them in") {
  CHECK(normalizeBusId("0000:17:00.0") == "0000:17:00.0");
  CHECK(normalizeBusId("0000:AB:00.1") == "0000:ab:00.1");
  CHECK(normalizeBusId("17:00.0") == "0000:17:00.0");
  CHECK(normalizeBusId("/sys/devices/pci0000:16/0000:16:02.0/0000:17:00.0") == "0000:17:00.0");
  CHECK(normalizeBusId("/sys/devices/pci0000:00/0000:00:03.0/virtio1") == "0000:00:03.0");
  CHECK(normalizeBusId("no id here").empty());
  CHECK(normalizeBusId("").empty());
}

TEST_CASE("hw topology: CPU lists parse, print and intersect as Linux spells them") {
  bool ok = false;
  std::vector<bool> s = parseCpuList("0-3,8,10-11", &ok);
  CHECK(ok);
  REQUIRE(s.size() == 12);
  CHECK(s[0]);
  CHECK(s[3]);
  CHECK(!s[4]);
  CHECK(s[8]);
  CHECK(!s[9]);
  CHECK(cpuListText(s) == "0-3,8,10-11");
  CHECK(cpuListText(parseCpuList("")).empty());
  parseCpuList("3-1", &ok);
  CHECK(!ok);
  parseCpuList("0-x", &ok);
  CHECK(!ok);
  CHECK(intersectCpuLists("0-15", "8-31") == "8-15");
  CHECK(intersectCpuLists("0-7", "16-31").empty());
  CHECK(intersectCpuLists("0,2,4", "0-2") == "0,2");
}

TEST_CASE("hw topology: a CUDA rank's threads run on its GPU's CPUs within the job's, as NCCL binds them") {
  NEEDS_HWLOC();
  auto t = loadTopo("server-8gpu-4nic.xml");
  const HwDevice& g5 = t->gpus()[5];  // socket 1: CPUs 16-31
  CHECK(bindingCpus(&g5, "0-31", false) == "16-31");
  CHECK(bindingCpus(&g5, "20-23,40-47", false) == "20-23");  // the job's CPUs near the GPU
  CHECK(bindingCpus(&g5, "0-7", false) == "0-7");            // none near it: the job's stay
  CHECK(bindingCpus(&g5, "0-7", true) == "16-31");           // NCCL_IGNORE_CPU_AFFINITY=1
  CHECK(bindingCpus(nullptr, "0-7", false) == "0-7");        // no GPU known
}

TEST_CASE("hw topology: places order ranks so that a ring's hops stay in a switch, a host bridge, a socket") {
  NEEDS_HWLOC();
  auto t = loadTopo("server-8gpu-4nic.xml");
  REQUIRE(t->gpus().size() == 8);
  auto place = [&](int g) { return t->place(t->gpus()[g]); };
  auto field = [](uint64_t p, int k) { return (int)(p >> (16 * k) & 0xffff); };  // 3 package .. 0 switch
  // The layout (make_topologies.py): GPUs 2k and 2k+1 share switch k; switches 0 and 1 hang off two host bridges
  // of socket 0, switches 2 and 3 off socket 1's.
  for (int g = 0; g < 8; g++)
    for (int k = 0; k < 4; k++) CHECK_MESSAGE(field(place(g), k) != 0, "GPU " << g << " field " << k);
  CHECK(place(0) == place(1));
  CHECK(place(6) == place(7));
  CHECK(place(0) != place(2));
  CHECK(field(place(0), 3) == field(place(2), 3));  // one package
  CHECK(field(place(0), 2) == field(place(2), 2));  // one NUMA node
  CHECK(field(place(0), 1) != field(place(2), 1));  // two host bridges
  CHECK(field(place(0), 3) != field(place(4), 3));  // two packages
  // Ranks on GPUs 0, 4, 1, 5, 2, 6, 3, 7 (rank r on GPU gpuOf[r]) in order of place: each switch's pair adjacent,
  // each socket's four adjacent.
  const int gpuOf[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  std::vector<int> order = {0, 1, 2, 3, 4, 5, 6, 7};
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return place(gpuOf[a]) < place(gpuOf[b]); });
  std::vector<int> gpus;
  for (int r : order) gpus.push_back(gpuOf[r]);
  CHECK(gpus == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  // Without a GPU, from CPUs: the package and NUMA node of the first CPU.
  auto h = loadTopo("host-2numa-interleaved.xml");
  CHECK(h->placeOfCpus("0") == h->placeOfCpus("2,4"));
  CHECK(h->placeOfCpus("0") < h->placeOfCpus("1"));
  CHECK(field(h->placeOfCpus("1"), 0) == 0);  // no switch
  CHECK(h->placeOfCpus("not a list") == 0);
}
