// net-ib's choices without a device: NCCL_IB_HCA filters, GID selection, message splitting, the registration cache.
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <sys/socket.h>

#include "config.h"
#include "regcache.h"

using namespace plexus::net_ib;

TEST_CASE("net-ib: NCCL_IB_HCA filters as NCCL reads them") {
  const HcaFilter all = HcaFilter::parse(nullptr);
  CHECK(all.keeps("mlx5_0", 1));
  CHECK(all.describe() == "all");

  // Prefixes by default: "mlx5_1" keeps mlx5_1 and mlx5_10; a port narrows to that port.
  const HcaFilter some = HcaFilter::parse("mlx5_0:1,mlx5_1");
  CHECK(some.keeps("mlx5_0", 1));
  CHECK_FALSE(some.keeps("mlx5_0", 2));
  CHECK(some.keeps("mlx5_1", 2));
  CHECK(some.keeps("mlx5_10", 1));
  CHECK_FALSE(some.keeps("mlx4_0", 1));
  CHECK(some.describe() == "mlx5_0:1,mlx5_1");

  // '=' matches whole names; '^' excludes; both together.
  const HcaFilter exact = HcaFilter::parse("=mlx5_1");
  CHECK(exact.keeps("mlx5_1", 1));
  CHECK_FALSE(exact.keeps("mlx5_10", 1));
  const HcaFilter notThree = HcaFilter::parse("^=mlx5_3");
  CHECK(notThree.keeps("mlx5_30", 1));
  CHECK_FALSE(notThree.keeps("mlx5_3", 1));
  CHECK(notThree.describe() == "all but =mlx5_3");
  const HcaFilter noBond = HcaFilter::parse("^mlx5_bond");
  CHECK_FALSE(noBond.keeps("mlx5_bond_0", 1));
  CHECK(noBond.keeps("mlx5_0", 1));

  // Stray commas and a port that is not a number: the entry stays, the port means "any".
  const HcaFilter sloppy = HcaFilter::parse(",mlx5_2:x,,");
  REQUIRE(sloppy.entries.size() == 1);
  CHECK(sloppy.keeps("mlx5_2", 7));
}

namespace {
GidEntry gid(int index, const char* text, GidType type) {
  GidEntry g;
  g.index = index;
  REQUIRE(inet_pton(AF_INET6, text, g.raw) == 1);
  g.type = type;
  return g;
}
}  // namespace

TEST_CASE("net-ib: a RoCE port's GID by index, version and address family") {
  // A typical RoCE port: link-local v1/v2, then the IPv4 address as v1/v2, then a global IPv6 one as v1/v2.
  const std::vector<GidEntry> table = {gid(0, "fe80::2", GidType::RoceV1),
                                       gid(1, "fe80::2", GidType::RoceV2),
                                       gid(2, "::ffff:10.0.0.7", GidType::RoceV1),
                                       gid(3, "::ffff:10.0.0.7", GidType::RoceV2),
                                       gid(4, "2001:db8::7", GidType::RoceV1),
                                       gid(5, "2001:db8::7", GidType::RoceV2),
                                       gid(6, "::", GidType::RoceV2)};
  std::string why;
  CHECK(chooseGid(table, false, GidPolicy{}, &why) == 3);  // default: RoCE v2, AF_INET
  GidPolicy v6;
  v6.family = AF_INET6;
  CHECK(chooseGid(table, false, v6, &why) == 5);  // global before link-local
  GidPolicy v1;
  v1.roceVersion = 1;
  CHECK(chooseGid(table, false, v1, &why) == 2);
  GidPolicy forced;
  forced.forcedIndex = 4;
  CHECK(chooseGid(table, false, forced, &why) == 4);
  forced.forcedIndex = 6;  // populated? no: all zero
  CHECK(chooseGid(table, false, forced, &why) == -1);
  CHECK(why.find("NCCL_IB_GID_INDEX=6") != std::string::npos);
  forced.forcedIndex = 9;
  CHECK(chooseGid(table, false, forced, &why) == -1);

  // Only IPv6 link-local v2 entries: that is what there is.
  CHECK(chooseGid({gid(0, "fe80::2", GidType::RoceV1), gid(1, "fe80::2", GidType::RoceV2)}, false, GidPolicy{}, &why) ==
        1);
  // Types unknown (no sysfs): the address family decides, global before link-local.
  CHECK(chooseGid({gid(0, "fe80::2", GidType::Unknown), gid(1, "::ffff:10.0.0.7", GidType::Unknown)}, false,
                  GidPolicy{}, &why) == 1);
  // An empty table (no IP address on the netdev) says so.
  why.clear();
  CHECK(chooseGid({gid(0, "::", GidType::RoceV2)}, false, GidPolicy{}, &why) == -1);
  CHECK(why.find("no populated entry") != std::string::npos);
  // InfiniBand routes by LID: index 0.
  CHECK(chooseGid({gid(0, "fe80::1", GidType::Ib)}, true, GidPolicy{}, &why) == 0);

  CHECK(gidIsIpv4(table[3]));
  CHECK(gidIsLinkLocal(table[0]));
  CHECK(gidText(table[3]) == "::ffff:10.0.0.7");
}

TEST_CASE("net-ib: a message split over queue pairs covers it exactly, queue pair 0 first") {
  for (int nqps : {1, 2, 3, 4, 16})
    for (size_t size : {(size_t)0, (size_t)1, (size_t)100, (size_t)16384, (size_t)16385, (size_t)65536, (size_t)1000003,
                        (size_t)(8u << 20)}) {
      CAPTURE(nqps);
      CAPTURE(size);
      const std::vector<Chunk> c = splitMessage(size, nqps);
      REQUIRE(!c.empty());
      CHECK((int)c.size() <= std::max(nqps, 1));
      CHECK((int)c.size() == chunkCount(size, nqps));
      size_t at = 0;
      for (size_t i = 0; i < c.size(); i++) {
        CHECK(c[i].offset == at);
        if (size) CHECK(c[i].size > 0);
        if (i + 1 < c.size()) CHECK(c[i].size % 128 == 0);
        at += c[i].size;
      }
      CHECK(at == size);
    }
  // Small messages stay whole; large ones use every queue pair.
  CHECK(chunkCount(4096, 4) == 1);
  CHECK(chunkCount(8u << 20, 4) == 4);
}

TEST_CASE("net-ib: the registration cache registers whole pages once and frees with the last holder") {
  std::vector<std::pair<uintptr_t, size_t>> live;
  int failNext = 0;
  RegCache cache(
      4096,
      [&](uintptr_t begin, size_t length, std::string* error) -> void* {
        if (failNext) {
          *error = "out of memory regions";
          return nullptr;
        }
        live.push_back({begin, length});
        return reinterpret_cast<void*>(live.size());
      },
      [&](void* handle) {
        live[(size_t)handle - 1] = {0, 0};
      });
  alignas(4096) static char buf[4 * 4096];
  std::string error;
  void* a = cache.acquire(buf + 100, 5000, &error);  // pages 0..1
  REQUIRE(a);
  CHECK(live[0] == std::make_pair((uintptr_t)buf, (size_t)8192));
  void* b = cache.acquire(buf + 4096, 4096, &error);  // inside: the same registration
  CHECK(b == a);
  CHECK(cache.registrations() == 1);
  void* c = cache.acquire(buf + 8000, 1000, &error);  // crosses into page 2: a new one
  CHECK(c != a);
  CHECK(cache.registrations() == 2);
  CHECK(cache.release(a));
  CHECK(live[0].second == 8192);  // one holder left
  CHECK(cache.release(b));
  CHECK(live[0].second == 0);  // the last one deregistered it
  CHECK(cache.entries() == 1);
  CHECK_FALSE(cache.release(reinterpret_cast<void*>(99)));
  failNext = 1;
  CHECK(cache.acquire(buf, 64, &error) == nullptr);
  CHECK(error == "out of memory regions");
  CHECK(cache.release(c));
  CHECK(cache.entries() == 0);
}
