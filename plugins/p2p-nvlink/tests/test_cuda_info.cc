// The CUDA connect info (cuda_conn.h): it fits plexusConnectInfo_v1_t, survives the trip, and a malformed or
// mismatched one is refused with a reason; canConnect's rules for CUDA ranks, directly and through the plugin.
#include <dlfcn.h>
#include <doctest/doctest.h>

#include <cstring>
#include <string>

#include "ctrl.h"
#include "cuda_conn.h"

using namespace p2p;

namespace {

const int kSizes[PLEXUS_NUM_PROTOCOLS] = {PLEXUS_LL_BUFF_BYTES, 0, 8 * 16384};

// A receiver's info as cudaSetup writes it for a peer in another process.
CudaInfo recvInfo(bool readMode = false) {
  CudaInfo i{};
  i.magic = kCudaInfoMagic;
  i.version = kCudaInfoVersion;
  i.role = kCudaRoleRecv;
  i.flags = readMode ? kCudaInfoRead : 0;
  strcpy(i.busId, "0000:1a:00.0");
  i.mailbox = 0x1234567;
  i.mem.kind = CudaKind::Vmm;
  i.mem.id = 0xabcdef00;
  i.mem.size = 2 << 20;
  uint64_t off = kCtrlBytes;
  for (int p = 0; p < PLEXUS_NUM_PROTOCOLS; p++) {
    if (!cudaHolds(false, readMode, p) || !kSizes[p]) continue;
    i.buffOffset[p] = off;
    i.buffSizes[p] = kSizes[p];
    off += roundPage(kSizes[p]);
  }
  return i;
}

CudaInfo sendInfo(bool readMode = false) {
  CudaInfo i = recvInfo(readMode);
  i.role = kCudaRoleSend;
  for (int p = 0; p < PLEXUS_NUM_PROTOCOLS; p++) i.buffOffset[p] = i.buffSizes[p] = 0;
  if (readMode) {
    i.buffOffset[PLEXUS_PROTO_SIMPLE] = kCtrlBytes;
    i.buffSizes[PLEXUS_PROTO_SIMPLE] = kSizes[PLEXUS_PROTO_SIMPLE];
  }
  return i;
}

// Decoded by the side that receives it: the sender decodes a receiver's info and the other way round.
std::string decode(const CudaInfo& info, bool sameProcess = false, bool readMode = false) {
  plexusConnectInfo_v1_t raw;
  cudaInfoEncode(info, &raw);
  CudaInfo out{};
  std::string why;
  const bool bySender = info.role == kCudaRoleRecv;
  const bool ok = cudaInfoDecode(raw, bySender, sameProcess, kSizes, readMode, &out, &why);
  if (ok) {
    CHECK(memcmp(&out, &info, sizeof(info)) == 0);
    return "";
  }
  CHECK(!why.empty());
  return why;
}

plexusPeerInfo_v1_t peer(int backend, uint64_t pidHash, uint64_t shmDev = 5, uint64_t host = 1, uint64_t machine = 2) {
  plexusPeerInfo_v1_t p{};
  p.backend = backend;
  p.pidHash = pidHash;
  p.shmDev = shmDev;
  p.hostHash = host;
  p.machineHash = machine;
  return p;
}

}  // namespace

TEST_CASE("cuda info: fits the 256 bytes and round-trips") {
  static_assert(sizeof(CudaInfo) <= PLEXUS_CONNECT_INFO_BYTES);
  CHECK(sizeof(CudaInfo) <= 256);
  MESSAGE("CudaInfo is " << sizeof(CudaInfo) << " of " << PLEXUS_CONNECT_INFO_BYTES << " bytes");
  CHECK(decode(recvInfo()) == "");
  CHECK(decode(sendInfo()) == "");
  CHECK(decode(recvInfo(true), false, true) == "");
  CHECK(decode(sendInfo(true), false, true) == "");
  CudaInfo shm = recvInfo();
  shm.mem.kind = CudaKind::Shm;
  strcpy(shm.mem.u.shmName, "/plexus-1-2-3");
  CHECK(decode(shm) == "");
  CudaInfo same = recvInfo();
  same.mem.kind = CudaKind::Device;
  same.mailbox = 0;
  CHECK(decode(same, true) == "");
  same.mem.kind = CudaKind::HostMapped;
  CHECK(decode(same, true) == "");
}

TEST_CASE("cuda info: which side holds which buffer") {
  CHECK(cudaHolds(false, false, PLEXUS_PROTO_SIMPLE));
  CHECK(cudaHolds(false, false, PLEXUS_PROTO_LL));
  CHECK(!cudaHolds(true, false, PLEXUS_PROTO_SIMPLE));
  CHECK(cudaHolds(true, true, PLEXUS_PROTO_SIMPLE));  // P2P read: the sender's Simple buffer
  CHECK(!cudaHolds(false, true, PLEXUS_PROTO_SIMPLE));
  CHECK(cudaHolds(false, true, PLEXUS_PROTO_LL));  // LL stays with the receiver
}

TEST_CASE("cuda info: malformed or mismatched info is refused with a reason") {
  CudaInfo i = recvInfo();
  i.magic = 0;
  CHECK(decode(i).find("not a CUDA connect info") != std::string::npos);
  i = recvInfo();
  i.version = 9;
  CHECK(decode(i) != "");
  // Info of the wrong role: decoding a receiver's info where a sender's is expected.
  {
    plexusConnectInfo_v1_t raw;
    cudaInfoEncode(recvInfo(), &raw);
    CudaInfo out;
    std::string why;
    CHECK(!cudaInfoDecode(raw, false, false, kSizes, false, &out, &why));
    CHECK(why.find("receiving side") != std::string::npos);
  }
  i = recvInfo();
  memset(i.busId, 'x', sizeof(i.busId));
  CHECK(decode(i).find("bus id") != std::string::npos);
  i = recvInfo();
  i.mem.kind = (CudaKind)9;
  CHECK(decode(i).find("memory kind") != std::string::npos);
  i = recvInfo();
  i.mem.kind = CudaKind::Device;  // a pointer means nothing in another process
  CHECK(decode(i).find("another process") != std::string::npos);
  i = recvInfo();
  CHECK(decode(i, true).find("this process") != std::string::npos);  // a Vmm handle for a peer of this process
  i = recvInfo();
  i.mailbox = 0;
  CHECK(decode(i).find("mailbox") != std::string::npos);
  i = recvInfo();
  i.mem.id |= 1;
  CHECK(decode(i).find("allocation id") != std::string::npos);
  i = recvInfo();
  i.mem.size = 100;
  CHECK(decode(i).find("out of range") != std::string::npos);
  i = recvInfo();
  i.mem.size = (uint64_t)1 << 50;
  CHECK(decode(i).find("out of range") != std::string::npos);
  i = recvInfo();
  i.mem.kind = CudaKind::Shm;
  memset(i.mem.u.shmName, 'a', sizeof(i.mem.u.shmName));
  CHECK(decode(i).find("shared memory name") != std::string::npos);
  i = recvInfo();
  i.buffOffset[PLEXUS_PROTO_SIMPLE] = i.mem.size - 100;
  CHECK(decode(i).find("protocol 2") != std::string::npos);
  i = recvInfo();
  i.buffOffset[PLEXUS_PROTO_LL] = 0;  // over the control block
  CHECK(decode(i).find("protocol 0") != std::string::npos);
  i = recvInfo();
  i.buffSizes[PLEXUS_PROTO_SIMPLE] = 4096;  // the communicator's sizes differ
  CHECK(decode(i).find("does not match") != std::string::npos);
  i = recvInfo();
  i.buffSizes[PLEXUS_PROTO_LL128] = 4096;
  CHECK(decode(i).find("protocol 1") != std::string::npos);
  // P2P read mode on one side only.
  CHECK(decode(recvInfo(true), false, false).find("PLEXUS_P2P_READ") != std::string::npos);
  CHECK(decode(sendInfo(false), false, true).find("PLEXUS_P2P_READ") != std::string::npos);
  // A sender claiming the Simple buffer outside read mode.
  CudaInfo s = sendInfo(true);
  s.flags = 0;
  CHECK(decode(s).find("protocol 2") != std::string::npos);
}

TEST_CASE("canConnect: CUDA ranks of one machine, host rules unchanged, backends never mix") {
  // cuda_conn's rule.
  auto a = peer(1, 10), b = peer(1, 11), c = peer(1, 10);
  CHECK(cudaCanConnect(&a, &b));
  CHECK(cudaCanConnect(&a, &c));
  auto otherShm = peer(1, 11, 6);
  CHECK(!cudaCanConnect(&a, &otherShm));  // another process without this /dev/shm: no host fallback
  auto sameProcessOtherShm = peer(1, 10, 6);
  CHECK(cudaCanConnect(&a, &sameProcessOtherShm));
  auto otherHost = peer(1, 11, 5, 9);
  CHECK(!cudaCanConnect(&a, &otherHost));
  auto otherMachine = peer(1, 11, 5, 1, 9);  // NCCL_HOSTID alike, machines apart: no GPU sharing
  CHECK(!cudaCanConnect(&a, &otherMachine));

  // Through the plugin's table (loaded as the core loads it: no CUDA driver is touched by canConnect).
  void* h = dlopen(P2P_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(h);
  auto* t = (const plexusTransport_v1_t*)dlsym(h, PLEXUS_TRANSPORT_PLUGIN_SYMBOL);
  REQUIRE(t);
  auto can = [&](plexusPeerInfo_v1_t x, plexusPeerInfo_v1_t y) {
    int ret = -1;
    CHECK(t->canConnect(nullptr, &x, &y, &ret) == ncclSuccess);
    return ret;
  };
  CHECK(can(peer(1, 10), peer(1, 11)) == 1);
  CHECK(can(peer(1, 10), peer(1, 10)) == 1);
  CHECK(can(peer(1, 10), peer(1, 11, 6)) == 0);
  CHECK(can(peer(1, 10), peer(1, 11, 5, 1, 9)) == 0);
  CHECK(can(peer(0, 10), peer(1, 11)) == 0);
  CHECK(can(peer(1, 10), peer(0, 10)) == 0);
  CHECK(can(peer(2, 10), peer(2, 10)) == 0);
  // Host backend, as before: same host and (same process or same /dev/shm); machineHash does not matter.
  CHECK(can(peer(0, 10), peer(0, 11)) == 1);
  CHECK(can(peer(0, 10), peer(0, 11, 5, 1, 9)) == 1);
  CHECK(can(peer(0, 10), peer(0, 11, 6)) == 0);
  CHECK(can(peer(0, 10), peer(0, 10, 6)) == 1);
  CHECK(can(peer(0, 10), peer(0, 11, 5, 3)) == 0);
}
