// Bootstrap: unique ids, the root, the ring, allGather, P2P, and the failures that must not hang. Everything runs on
// loopback (NCCL_SOCKET_IFNAME=lo); ranks are threads of this process.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "misc/check.h"
#include "misc/rand.h"

// doctest's INFO and WARN win in this file; it logs nothing through the NCCL-style macros.
#undef INFO
#undef WARN
#include <doctest/doctest.h>

using namespace plexus;

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void loopbackEnv(int timeoutSec = 10) {
  for (const char* v : {"NCCL_COMM_ID", "PLEXUS_COMM_ID", "PLEXUS_SOCKET_IFNAME", "NCCL_SOCKET_FAMILY",
                        "PLEXUS_SOCKET_FAMILY", "NCCL_BOOTSTRAP_TIMEOUT"})
    unsetenv(v);
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  setenv("PLEXUS_BOOTSTRAP_TIMEOUT", std::to_string(timeoutSec).c_str(), 1);
}

// A loopback port that nothing listens on (bound, then released).
int closedPort() {
  SocketAddress a{};
  REQUIRE(parseAddress("127.0.0.1:0", &a) == ncclSuccess);
  Socket s;
  REQUIRE(s.listen(a) == ncclSuccess);
  return addressPort(s.addr());
}

struct RankResult {
  ncclResult_t res = ncclInternalError;
  std::string error;  // ncclGetLastError of the rank's thread when res fails
};

// Runs fn(rank, abortFlag) on one thread per rank. Bounded: past `limitSec` every abort flag is set, and if the
// threads still do not finish the process exits rather than hang the suite.
std::vector<RankResult> runRanks(int nranks, std::function<ncclResult_t(int, volatile uint32_t*)> fn,
                                 double limitSec = 20) {
  struct Shared {
    std::mutex m;
    std::condition_variable cv;
    int done = 0;
    std::vector<RankResult> results;
    std::unique_ptr<uint32_t[]> aborts;
  };
  auto sh = std::make_shared<Shared>();
  sh->results.resize(nranks);
  sh->aborts.reset(new uint32_t[nranks]());
  for (int r = 0; r < nranks; r++) {
    std::thread([sh, fn, r] {
      RankResult out;
      out.res = fn(r, (volatile uint32_t*)&sh->aborts[r]);
      if (out.res != ncclSuccess) out.error = lastError(nullptr);
      std::lock_guard<std::mutex> lock(sh->m);
      sh->results[r] = out;
      sh->done++;
      sh->cv.notify_all();
    }).detach();
  }
  std::unique_lock<std::mutex> lock(sh->m);
  if (!sh->cv.wait_for(lock, std::chrono::duration<double>(limitSec), [&] { return sh->done == nranks; })) {
    for (int r = 0; r < nranks; r++) __atomic_store_n(&sh->aborts[r], 1u, __ATOMIC_RELEASE);
    if (!sh->cv.wait_for(lock, std::chrono::seconds(5), [&] { return sh->done == nranks; })) {
      fprintf(stderr, "test_bootstrap: %d of %d ranks still blocked after %.0f s and an abort; giving up\n",
              nranks - sh->done, nranks, limitSec + 5);
      std::_Exit(1);
    }
    FAIL_CHECK("ranks needed an abort to finish within " << limitSec << " s");
  }
  return sh->results;
}

void checkAll(const std::vector<RankResult>& results) {
  for (size_t r = 0; r < results.size(); r++) {
    INFO("rank ", r, ": ", results[r].error);
    CHECK(results[r].res == ncclSuccess);
  }
}

// Every rank: allGather (small and larger than the socket buffers), P2P with every rank (itself included) using
// several tags received out of order, then a barrier.
ncclResult_t exercise(Bootstrap& b) {
  int n = b.nranks(), me = b.rank();
  std::vector<uint64_t> vals(n, 0);
  vals[me] = 1000 * me + 7;
  NCCLCHECK(b.allGather(vals.data(), sizeof(uint64_t)));
  for (int r = 0; r < n; r++)
    if (vals[r] != 1000ull * r + 7)
      return setError(nullptr, ncclInternalError, "allGather slot %d = %llu", r, (unsigned long long)vals[r]);
  const size_t big = 200 << 10;
  std::vector<uint8_t> blocks(n * big);
  for (size_t i = 0; i < big; i++) blocks[me * big + i] = (uint8_t)(me * 31 + i);
  NCCLCHECK(b.allGather(blocks.data(), big));
  for (int r = 0; r < n; r++)
    for (size_t i = 0; i < big; i += 997)
      if (blocks[r * big + i] != (uint8_t)(r * 31 + i)) return setError(nullptr, ncclInternalError, "block %d", r);

  constexpr int kTags = 4;
  auto payload = [](int from, int to, int tag) {
    std::vector<int> v((tag + 1) * 3);
    for (size_t i = 0; i < v.size(); i++) v[i] = from * 10000 + to * 100 + tag * 10 + (int)i;
    return v;
  };
  for (int peer = 0; peer < n; peer++)
    for (int tag = 0; tag < kTags; tag++) {
      auto v = payload(me, peer, tag);
      NCCLCHECK(b.send(peer, tag, v.data(), v.size() * sizeof(int)));
    }
  for (int k = 0; k < n; k++) {
    int peer = (me + n - k) % n;  // a different order from the sends
    for (int tag = kTags - 1; tag >= 0; tag--) {
      auto want = payload(peer, me, tag);
      std::vector<int> got(want.size(), -1);
      NCCLCHECK(b.recv(peer, tag, got.data(), got.size() * sizeof(int)));
      if (got != want) return setError(nullptr, ncclInternalError, "wrong payload from %d tag %d", peer, tag);
    }
  }
  return b.barrier();
}

}  // namespace

TEST_CASE("bootstrap: addresses and interfaces") {
  loopbackEnv();
  SocketAddress a{};
  REQUIRE(parseAddress("127.0.0.1:1234", &a) == ncclSuccess);
  CHECK(toString(a) == "127.0.0.1:1234");
  REQUIRE(parseAddress("[::1]:80", &a) == ncclSuccess);
  CHECK(toString(a) == "[::1]:80");
  REQUIRE(parseAddress("localhost:5", &a) == ncclSuccess);
  CHECK(addressPort(a) == 5);
  for (const char* bad : {"127.0.0.1", "1.2.3.4:99999", "[::1", "::1:80", ":80"}) {
    INFO(bad);
    CHECK(parseAddress(bad, &a) == ncclInvalidArgument);
    CHECK(std::string(lastError(nullptr)).find(bad) != std::string::npos);
  }

  std::string name;
  REQUIRE(findInterface(&a, &name) == ncclSuccess);
  CHECK(name == "lo");
  CHECK(toString(a) == "127.0.0.1:0");
  setenv("NCCL_SOCKET_IFNAME", "=lo", 1);
  REQUIRE(findInterface(&a, &name) == ncclSuccess);
  CHECK(name == "lo");
  setenv("NCCL_SOCKET_IFNAME", "^lo", 1);  // only looks at addresses; nothing is sent anywhere
  ncclResult_t res = findInterface(&a, &name);
  CHECK((res == ncclSystemError || name != "lo"));
  setenv("NCCL_SOCKET_IFNAME", "=l", 1);  // exact: "l" is only a prefix of "lo"
  CHECK(findInterface(&a, &name) == ncclSystemError);
  std::string msg = lastError(nullptr);
  CHECK(msg.find("NCCL_SOCKET_IFNAME=\"=l\"") != std::string::npos);
  CHECK(msg.find("lo(127.0.0.1") != std::string::npos);
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  setenv("NCCL_SOCKET_FAMILY", "AF_INET6", 1);  // lo's only IPv6 address is loopback, which NCCL skips
  CHECK(findInterface(&a, &name) == ncclSystemError);
  CHECK(std::string(lastError(nullptr)).find("AF_INET6") != std::string::npos);
  unsetenv("NCCL_SOCKET_FAMILY");
  setenv("NCCL_SOCKET_IFNAME", "nonexistent0", 1);
  setenv("PLEXUS_SOCKET_IFNAME", "lo", 1);  // the PLEXUS_ twin wins
  REQUIRE(findInterface(&a, &name) == ncclSuccess);
  CHECK(name == "lo");
  loopbackEnv();
}

TEST_CASE("bootstrap: sockets") {
  loopbackEnv();
  for (const char* host : {"127.0.0.1:0", "[::1]:0"}) {
    INFO(host);
    SocketAddress a{};
    REQUIRE(parseAddress(host, &a) == ncclSuccess);
    Socket listener;
    if (listener.listen(a) != ncclSuccess) {
      MESSAGE("cannot listen on " << host << ": " << lastError(nullptr) << "; skipped");
      continue;
    }
    CHECK(addressPort(listener.addr()) != 0);
    Socket client, server;
    REQUIRE(client.connect(listener.addr(), Deadline::after(5), nullptr, "the test listener") == ncclSuccess);
    REQUIRE(listener.accept(&server, Deadline::after(5), nullptr, "the test client") == ncclSuccess);
    // More than the socket buffers hold, both ways at once: socketSendRecv must not deadlock.
    std::vector<char> out(8 << 20, 'x'), in(8 << 20, 0), back(8 << 20, 0);
    std::thread echo([&] {
      CHECK(socketSendRecv(&server, out.data(), out.size(), &server, back.data(), back.size(), Deadline::after(10),
                           nullptr, "echo") == ncclSuccess);
    });
    CHECK(socketSendRecv(&client, out.data(), out.size(), &client, in.data(), in.size(), Deadline::after(10), nullptr,
                         "echo") == ncclSuccess);
    echo.join();
    CHECK(in == out);
    CHECK(back == out);

    // Nothing arrives: a timeout that names the peer; then the peer closes: ncclRemoteError.
    char c;
    auto t0 = Clock::now();
    CHECK(client.recvAll(&c, 1, Deadline::after(0.3), nullptr, "a byte") == ncclSystemError);
    CHECK(secondsSince(t0) < 1.0);
    CHECK(std::string(lastError(nullptr)).find(toString(client.addr())) != std::string::npos);
    server.close();
    CHECK(client.recvAll(&c, 1, Deadline::after(5), nullptr, "a byte") == ncclRemoteError);
    CHECK(std::string(lastError(nullptr)).find("closed the connection") != std::string::npos);
    // An abort flag frees a blocked accept.
    uint32_t flag = 1;
    Socket none;
    t0 = Clock::now();
    CHECK(listener.accept(&none, Deadline::after(5), (volatile uint32_t*)&flag, "nobody") != ncclSuccess);
    CHECK(secondsSince(t0) < 0.5);
    Socket moved = std::move(listener);
    CHECK_FALSE(listener.valid());
    CHECK(moved.valid());
  }
}

TEST_CASE("bootstrap: unique ids") {
  loopbackEnv();
  ncclUniqueId a, b;
  REQUIRE(bootstrapGetUniqueId(&a) == ncclSuccess);
  REQUIRE(bootstrapGetUniqueId(&b) == ncclSuccess);
  CHECK(handleValid(a));
  CHECK(handleValid(b));
  CHECK(memcmp(&a, &b, sizeof(a)) != 0);
  CHECK(toString(handleFromId(a).addr).rfind("127.0.0.1:", 0) == 0);

  char wire[sizeof(ncclUniqueId)];  // what an MPI broadcast would carry
  memcpy(wire, &a, sizeof(wire));
  ncclUniqueId c;
  memcpy(&c, wire, sizeof(c));
  CHECK(handleValid(c));

  ncclUniqueId zero{};
  CHECK_FALSE(handleValid(zero));
  ncclUniqueId garbage;
  for (size_t i = 0; i < sizeof(garbage); i += 8) {
    uint64_t x = randomU64();
    memcpy(garbage.internal + i, &x, 8);
  }
  CHECK_FALSE(handleValid(garbage));
  for (size_t i : {0, 9, 20, 40, 100}) {
    ncclUniqueId d = a;
    d.internal[i] ^= 0x10;
    INFO("flipped byte ", i);
    CHECK_FALSE(handleValid(d));
  }
  std::unique_ptr<Bootstrap> bs;
  CHECK(Bootstrap::init(zero, 0, 1, nullptr, &bs) == ncclInvalidArgument);
  CHECK(Bootstrap::init(a, 2, 2, nullptr, &bs) == ncclInvalidArgument);

  setenv("NCCL_COMM_ID", "127.0.0.1:29511", 1);  // no root is started: every process computes the same id
  REQUIRE(bootstrapGetUniqueId(&a) == ncclSuccess);
  REQUIRE(bootstrapGetUniqueId(&b) == ncclSuccess);
  CHECK(memcmp(&a, &b, sizeof(a)) == 0);
  CHECK(handleValid(a));
  CHECK(handleFromId(a).magic == NCCL_MAGIC);
  CHECK(toString(handleFromId(a).addr) == "127.0.0.1:29511");
  setenv("NCCL_COMM_ID", "127.0.0.1", 1);
  CHECK(bootstrapGetUniqueId(&a) == ncclInvalidArgument);
  CHECK(std::string(lastError(nullptr)).find("NCCL_COMM_ID") != std::string::npos);
  loopbackEnv();
}

TEST_CASE("bootstrap: 1, 2, 3, 4 and 8 ranks") {
  loopbackEnv();
  for (int n : {1, 2, 3, 4, 8}) {
    INFO("nranks=", n);
    ncclUniqueId id;
    REQUIRE(bootstrapGetUniqueId(&id) == ncclSuccess);
    checkAll(runRanks(n, [&id, n](int rank, volatile uint32_t* abortFlag) {
      std::unique_ptr<Bootstrap> b;
      NCCLCHECK(Bootstrap::init(id, rank, n, abortFlag, &b));
      if (b->rank() != rank || b->nranks() != n) return ncclInternalError;
      return exercise(*b);
    }));
  }
}

TEST_CASE("bootstrap: NCCL_COMM_ID with the root created by rank 0") {
  loopbackEnv();
  std::string env = "127.0.0.1:" + std::to_string(closedPort());
  setenv("NCCL_COMM_ID", env.c_str(), 1);
  ncclUniqueId id;
  REQUIRE(bootstrapGetUniqueId(&id) == ncclSuccess);
  checkAll(runRanks(3, [&id](int rank, volatile uint32_t* abortFlag) {
    if (rank == 0) NCCLCHECK(bootstrapCreateRoot(id, true));
    std::unique_ptr<Bootstrap> b;
    NCCLCHECK(Bootstrap::init(id, rank, 3, abortFlag, &b));
    return exercise(*b);
  }));
  loopbackEnv();
}

TEST_CASE("bootstrap: unreachable root fails in time and names the address") {
  loopbackEnv(2);
  std::string where = "127.0.0.1:" + std::to_string(closedPort());
  setenv("NCCL_COMM_ID", where.c_str(), 1);
  ncclUniqueId id;
  REQUIRE(bootstrapGetUniqueId(&id) == ncclSuccess);  // env ids start no root
  unsetenv("NCCL_COMM_ID");
  auto t0 = Clock::now();
  auto results = runRanks(1, [&id](int, volatile uint32_t* abortFlag) {
    std::unique_ptr<Bootstrap> b;
    return Bootstrap::init(id, 1, 2, abortFlag, &b);
  });
  double took = secondsSince(t0);
  CHECK(results[0].res == ncclSystemError);
  CHECK(results[0].error.find(where) != std::string::npos);
  CHECK(took >= 1.5);
  CHECK(took < 3.5);
  loopbackEnv();
}

TEST_CASE("bootstrap: garbage connections at the root do not disturb init") {
  loopbackEnv();
  ncclUniqueId id;
  REQUIRE(bootstrapGetUniqueId(&id) == ncclSuccess);
  BootstrapHandle h = handleFromId(id);
  Deadline dl = Deadline::after(5);
  std::vector<Socket> held;  // kept open and silent until init is over
  auto connectRoot = [&]() {
    Socket s;
    REQUIRE(s.connect(h.addr, dl, nullptr, "the root") == ncclSuccess);
    return s;
  };
  held.push_back(connectRoot());  // silent from the start
  {
    Socket s = connectRoot();  // connect and close
  }
  {
    Socket s = connectRoot();  // half a hello, then silence
    REQUIRE(s.sendAll(&h.magic, 4, dl, nullptr) == ncclSuccess);
    held.push_back(std::move(s));
  }
  {
    Socket s = connectRoot();  // right magic, wrong type
    struct __attribute__((packed)) {
      uint64_t magic;
      int32_t type;
    } hello{h.magic, 99};
    REQUIRE(s.sendAll(&hello, sizeof(hello), dl, nullptr) == ncclSuccess);
    held.push_back(std::move(s));
  }
  std::atomic<bool> stop{false};
  std::thread spammer([&] {  // random bytes, while the ranks register
    while (!stop) {
      Socket s;
      if (s.connect(h.addr, Deadline::after(1), nullptr, "the root") != ncclSuccess) break;
      uint64_t junk[8];
      for (auto& x : junk) x = randomU64();
      (void)s.sendAll(junk, sizeof(junk), Deadline::after(1), nullptr);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto t0 = Clock::now();
  auto results = runRanks(4, [&id](int rank, volatile uint32_t* abortFlag) {
    std::unique_ptr<Bootstrap> b;
    NCCLCHECK(Bootstrap::init(id, rank, 4, abortFlag, &b));
    return exercise(*b);
  });
  double took = secondsSince(t0);
  stop = true;
  spammer.join();
  checkAll(results);
  CHECK(took < 2.0);  // silent connections must not stall the root
}

namespace {

// The loopback TCP ports this process listens on, from /proc: the ranks' listen ports are ephemeral and known
// only inside Bootstrap::init, which is when the next test throws garbage at them.
std::vector<SocketAddress> ownListeners() {
  std::set<std::string> inodes;  // of this process's sockets
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    std::string link = std::filesystem::read_symlink(e.path(), ec).string();
    if (!ec && link.rfind("socket:[", 0) == 0) inodes.insert(link.substr(8, link.size() - 9));
  }
  std::vector<SocketAddress> out;
  for (const char* file : {"/proc/self/net/tcp", "/proc/self/net/tcp6"}) {
    const bool v6 = strstr(file, "tcp6") != nullptr;
    std::ifstream f(file);
    std::string line;
    std::getline(f, line);  // the column names
    while (std::getline(f, line)) {
      std::istringstream ss(line);
      std::string sl, local, remote, st, queues, timer, retr, uid, timeout, inode;
      ss >> sl >> local >> remote >> st >> queues >> timer >> retr >> uid >> timeout >> inode;
      if (st != "0A" || !inodes.count(inode)) continue;  // 0A: LISTEN
      const std::string ip = local.substr(0, local.find(':'));
      if (ip != (v6 ? "00000000000000000000000001000000" : "0100007F")) continue;  // loopback only
      SocketAddress a{};
      REQUIRE(parseAddress(v6 ? "[::1]:0" : "127.0.0.1:0", &a) == ncclSuccess);
      setAddressPort(&a, (uint16_t)std::stoul(local.substr(local.find(':') + 1), nullptr, 16));
      out.push_back(a);
    }
  }
  return out;
}

// One attacker: until `stop`, for at most `limitSec` and `maxConns` connections, throws at every listener of
// this process one of: random bytes, a silent connection held open, a plausible hello (right magic with a wrong
// type or rank, or NCCL's magic) followed by a frame header with a huge length, a hello cut off mid-way, a reset.
void attack(uint64_t magic, const std::atomic<bool>& stop, std::atomic<int>* made, double limitSec, int maxConns) {
  auto t0 = Clock::now();
  std::vector<Socket> held;
  std::vector<SocketAddress> targets;
  for (int i = 0; i < maxConns && !stop && secondsSince(t0) < limitSec; i++) {
    if (i % 16 == 0) targets = ownListeners();
    if (targets.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      continue;
    }
    Socket s;
    if (s.connect(targets[randomU64() % targets.size()], Deadline::after(0.2), nullptr, "a listener") != ncclSuccess)
      continue;  // its owner is done
    made->fetch_add(1);
    struct __attribute__((packed)) {
      uint64_t magic;
      int32_t type, rank;
      int32_t tag;
      uint32_t pad;
      uint64_t size;
    } frame{};
    std::string err;
    switch (randomU64() % 6) {
      case 0: {  // random bytes
        uint64_t junk[8];
        for (auto& x : junk) x = randomU64();
        (void)s.sendAll(junk, 1 + randomU64() % sizeof(junk), Deadline::after(0.2), nullptr, "junk", &err);
        break;
      }
      case 1:  // half-open: connected, silent, held until the end
        if (held.size() < 32) held.push_back(std::move(s));
        break;
      case 2:  // the right magic, a type no listener takes here or a rank out of range, then a huge length
      case 3:  // NCCL's magic with a ring hello
        frame = {
            randomU64() % 2 ? magic : NCCL_MAGIC, randomU64() % 2 ? 17 : 99, (int32_t)(1000 + i), 7, 0, 1ull << 62};
        if (frame.magic == NCCL_MAGIC) frame.type = 16;
        (void)s.sendAll(&frame, sizeof(frame), Deadline::after(0.2), nullptr, "a frame", &err);
        if (held.size() < 32) held.push_back(std::move(s));
        break;
      case 4:  // a hello cut off mid-way, then closed
        frame.magic = magic;
        (void)s.sendAll(&frame, 6, Deadline::after(0.2), nullptr, "half a hello", &err);
        break;
      default: {  // reset
        linger l{1, 0};
        setsockopt(s.fd(), SOL_SOCKET, SO_LINGER, &l, sizeof(l));
        break;
      }
    }
  }
}

}  // namespace

TEST_CASE("bootstrap: garbage at the root's and the ranks' ports during init") {
  loopbackEnv();
  constexpr int kRanks = 6, kAttackers = 4;
  ncclUniqueId id;
  REQUIRE(bootstrapGetUniqueId(&id) == ncclSuccess);
  const uint64_t magic = handleFromId(id).magic;
  std::atomic<bool> stop{false};
  std::atomic<int> made{0};
  std::vector<std::thread> attackers;
  for (int a = 0; a < kAttackers; a++) attackers.emplace_back(attack, magic, std::cref(stop), &made, 15.0, 3000);
  auto t0 = Clock::now();
  // Rank 0 comes late, so that the others wait in init with garbage queuing on their ports before their ring
  // connections arrive.
  auto results = runRanks(kRanks, [&id](int rank, volatile uint32_t* abortFlag) {
    if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::unique_ptr<Bootstrap> b;
    NCCLCHECK(Bootstrap::init(id, rank, kRanks, abortFlag, &b));
    std::vector<uint64_t> vals(kRanks * 512);
    for (int i = 0; i < 512; i++) vals[rank * 512 + i] = 1000003ull * rank + i;
    NCCLCHECK(b->allGather(vals.data(), 512 * sizeof(uint64_t)));
    for (int r = 0; r < kRanks; r++)
      for (int i = 0; i < 512; i++)
        if (vals[r * 512 + i] != 1000003ull * r + i)
          return setError(nullptr, ncclInternalError, "allGather slot %d[%d] is wrong", r, i);
    return ncclSuccess;
  });
  double took = secondsSince(t0);
  stop = true;
  for (auto& t : attackers) t.join();
  checkAll(results);
  MESSAGE(made.load() << " garbage connections; init + allGather took " << took << " s");
  CHECK(made.load() >= 20);
  CHECK(took < 3.0);  // one silent connection in an accept loop alone would cost 2 s
}

TEST_CASE("bootstrap: ranks that disagree all fail without hanging") {
  loopbackEnv();
  SUBCASE("nranks mismatch") {
    ncclUniqueId id;
    REQUIRE(bootstrapGetUniqueId(&id) == ncclSuccess);
    auto results = runRanks(4, [&id](int rank, volatile uint32_t* abortFlag) {
      std::unique_ptr<Bootstrap> b;
      return Bootstrap::init(id, rank, rank == 3 ? 8 : 4, abortFlag, &b);
    });
    for (auto& r : results) {
      INFO(r.error);
      CHECK(r.res == ncclInvalidUsage);
      CHECK(r.error.find("says nranks=") != std::string::npos);
    }
  }
  SUBCASE("duplicate rank") {
    ncclUniqueId id;
    REQUIRE(bootstrapGetUniqueId(&id) == ncclSuccess);
    auto results = runRanks(2, [&id](int, volatile uint32_t* abortFlag) {
      std::unique_ptr<Bootstrap> b;
      return Bootstrap::init(id, 1, 2, abortFlag, &b);
    });
    for (auto& r : results) {
      INFO(r.error);
      CHECK(r.res == ncclInvalidUsage);
      CHECK(r.error.find("rank 1 registered twice") != std::string::npos);
    }
  }
}

TEST_CASE("bootstrap: a missing rank fails the others in time and is named") {
  loopbackEnv(2);
  ncclUniqueId id;
  REQUIRE(bootstrapGetUniqueId(&id) == ncclSuccess);
  auto t0 = Clock::now();
  auto results = runRanks(3, [&id](int rank, volatile uint32_t* abortFlag) {
    std::unique_ptr<Bootstrap> b;
    return Bootstrap::init(id, rank, 4, abortFlag, &b);  // rank 3 never comes
  });
  CHECK(secondsSince(t0) < 4.5);
  for (auto& r : results) {
    INFO(r.error);
    CHECK(r.res == ncclSystemError);
    CHECK(r.error.find("missing ranks: 3") != std::string::npos);
  }
  loopbackEnv();
}

TEST_CASE("bootstrap: abort and size mismatches") {
  loopbackEnv();
  ncclUniqueId id;
  REQUIRE(bootstrapGetUniqueId(&id) == ncclSuccess);
  checkAll(runRanks(2, [&id](int rank, volatile uint32_t* abortFlag) {
    std::unique_ptr<Bootstrap> b;
    NCCLCHECK(Bootstrap::init(id, rank, 2, abortFlag, &b));
    // A size that differs from the expected one fails the receive and leaves the stream in step.
    uint64_t eight = 8;
    if (rank == 0) NCCLCHECK(b->send(1, 1, &eight, sizeof(eight)));
    if (rank == 1) {
      uint32_t four;
      if (b->recv(0, 1, &four, sizeof(four)) != ncclInternalError) return ncclInvalidUsage;
      std::string msg = lastError(nullptr);
      if (msg.find("rank 0 with tag 1") == std::string::npos || msg.find("8 bytes") == std::string::npos ||
          msg.find("expected 4") == std::string::npos)
        return setError(nullptr, ncclInvalidUsage, "unexpected message: %s", msg.c_str());
    }
    NCCLCHECK(b->barrier());
    // A receive nobody answers is freed by the communicator's flag.
    std::thread aborter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      __atomic_store_n(abortFlag, 1u, __ATOMIC_RELEASE);
    });
    auto t0 = Clock::now();
    int x;
    ncclResult_t res = b->recv(1 - rank, 9, &x, sizeof(x));
    double took = secondsSince(t0);
    aborter.join();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // rank 1 must see its flag, not a closed peer
    // Released by the flag raised 0.2 s after the wait began: not before it, and promptly after.
    if (res == ncclSuccess || took < 0.15 || took > 1.0)
      return setError(nullptr, ncclInternalError, "abort: res %d after %.2f s", (int)res, took);
    return ncclSuccess;
  }));
  // An init that waits for a missing rank is freed by the communicator's flag too.
  REQUIRE(bootstrapGetUniqueId(&id) == ncclSuccess);
  auto results = runRanks(1, [&id](int, volatile uint32_t* abortFlag) {
    std::thread aborter([abortFlag] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      __atomic_store_n(abortFlag, 1u, __ATOMIC_RELEASE);
    });
    auto t0 = Clock::now();
    std::unique_ptr<Bootstrap> b;
    ncclResult_t res = Bootstrap::init(id, 0, 2, abortFlag, &b);
    double took = secondsSince(t0);
    aborter.join();
    return res != ncclSuccess && took >= 0.15 && took < 1.0 ? ncclSuccess : ncclInternalError;
  });
  checkAll(results);
}
