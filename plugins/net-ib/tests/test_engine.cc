// net-ib's data path (engine.h) between a sender and a receiver over the in-memory loopback fabric: every byte
// and size checked, with queue pairs executed in random order.
#include <doctest/doctest.h>

#include <deque>
#include <memory>
#include <numeric>

#include "engine.h"
#include "loopback.h"

using namespace plexus::net_ib;
using namespace plexus::net_ib::test;

namespace {

struct Pair {
  Fabric fabric;
  LoopWire sendWire, recvWire;
  std::unique_ptr<SendShared> sendShared{new SendShared{}};
  std::unique_ptr<RecvShared> recvShared{new RecvShared{}};
  uint32_t sendKey, recvKey;
  std::unique_ptr<Engine> sender, receiver;

  Pair(int nqps, unsigned seed) : fabric(seed), sendWire(&fabric, nqps), recvWire(&fabric, nqps) {
    sendWire.connect(&recvWire);
    recvWire.connect(&sendWire);
    sendKey = fabric.registerMemory(sendShared.get(), sizeof(SendShared));
    recvKey = fabric.registerMemory(recvShared.get(), sizeof(RecvShared));
    sender.reset(
        new Engine(&sendWire, nqps, sendShared.get(), sendKey, {(uint64_t)(uintptr_t)recvShared.get(), recvKey}));
    receiver.reset(
        new Engine(&recvWire, nqps, recvShared.get(), recvKey, {(uint64_t)(uintptr_t)sendShared.get(), sendKey}));
    REQUIRE(receiver->start());
  }
};

// Waits for a request, bounded in polls (the fabric runs only when someone polls).
bool waitFor(Engine& e, Request* r, int* sizes) {
  for (int i = 0; i < 1000000; i++) {
    int done = 0;
    if (!e.test(r, &done, sizes)) return false;
    if (done) return true;
  }
  FAIL("a request did not complete within a million polls");
  return false;
}

std::vector<char> pattern(size_t size, int seed) {
  std::vector<char> v(size);
  for (size_t i = 0; i < size; i++) v[i] = (char)(i * 131 + seed * 7 + (i >> 9));
  return v;
}

}  // namespace

TEST_CASE("net-ib engine: messages of every size arrive whole over 1, 2 and 4 queue pairs") {
  for (int nqps : {1, 2, 4})
    for (unsigned seed : {1u, 2u, 3u}) {
      CAPTURE(nqps);
      CAPTURE(seed);
      Pair p(nqps, seed);
      for (size_t size : {(size_t)0, (size_t)1, (size_t)17, (size_t)4096, (size_t)65536, (size_t)(1 << 20) + 3}) {
        CAPTURE(size);
        std::vector<char> src = pattern(size, (int)seed), dst(size + 64, 0x55);
        const uint32_t skey = p.fabric.registerMemory(src.data(), src.size());
        const uint32_t rkey = p.fabric.registerMemory(dst.data(), dst.size());
        void* data[1] = {dst.data()};
        size_t sizes[1] = {dst.size()};
        int tags[1] = {7};
        uint32_t rkeys[1] = {rkey};
        Request *rr = nullptr, *sr = nullptr;
        REQUIRE(p.receiver->irecv(1, data, sizes, tags, rkeys, &rr));
        REQUIRE(rr);
        // The sender cannot start before the clear-to-send entry has landed.
        for (int i = 0; i < 100000 && !sr; i++) REQUIRE(p.sender->isend(src.data(), size, 7, skey, &sr));
        REQUIRE(sr);
        int got[1] = {-1};
        REQUIRE(waitFor(*p.receiver, rr, got));
        CHECK(got[0] == (int)size);
        CHECK(std::equal(src.begin(), src.end(), dst.begin()));
        CHECK(dst[size] == 0x55);  // nothing past the message
        REQUIRE(waitFor(*p.sender, sr, nullptr));
        p.fabric.forget(skey);
        p.fabric.forget(rkey);
      }
      CHECK(p.sender->inFlight() == 0);
      CHECK(p.receiver->inFlight() == 0);
    }
}

TEST_CASE("net-ib engine: a multi-receive matches its buffers by tag, whatever order the sends come in") {
  Pair p(2, 11);
  constexpr int n = 3;
  std::vector<char> dst[n], src[n];
  void* data[n];
  size_t sizes[n];
  int tags[n] = {10, 11, 12};
  uint32_t rkeys[n];
  for (int i = 0; i < n; i++) {
    dst[i].assign(70000, 0);
    src[i] = pattern(1000 * (i + 1) + (i == 2 ? 60000 : 0), i);
    data[i] = dst[i].data();
    sizes[i] = dst[i].size();
    rkeys[i] = p.fabric.registerMemory(dst[i].data(), dst[i].size());
  }
  Request* rr = nullptr;
  REQUIRE(p.receiver->irecv(n, data, sizes, tags, rkeys, &rr));
  Request* sr[n] = {};
  for (int i : {2, 0, 1}) {
    const uint32_t key = p.fabric.registerMemory(src[i].data(), src[i].size());
    for (int k = 0; k < 100000 && !sr[i]; k++)
      REQUIRE(p.sender->isend(src[i].data(), src[i].size(), tags[i], key, &sr[i]));
    REQUIRE(sr[i]);
  }
  int got[n] = {};
  REQUIRE(waitFor(*p.receiver, rr, got));
  for (int i = 0; i < n; i++) {
    CHECK(got[i] == (int)src[i].size());
    CHECK(std::equal(src[i].begin(), src[i].end(), dst[i].begin()));
    REQUIRE(waitFor(*p.sender, sr[i], nullptr));
  }
}

TEST_CASE("net-ib engine: 200 messages with up to 32 receives in flight wrap the FIFO in order") {
  Pair p(3, 5);
  constexpr int kMsgs = 200, kSize = 40000;
  std::vector<char> src(kSize * kMsgs), dst(kSize * kMsgs, 0);
  std::iota(src.begin(), src.end(), 0);
  const uint32_t skey = p.fabric.registerMemory(src.data(), src.size());
  const uint32_t rkey = p.fabric.registerMemory(dst.data(), dst.size());
  std::deque<std::pair<Request*, int>> recvs, sends;
  int posted = 0, sent = 0, received = 0;
  for (int round = 0; round < 2000000 && received < kMsgs; round++) {
    if (posted < kMsgs && recvs.size() < (size_t)kSlots) {
      void* data[1] = {dst.data() + (size_t)posted * kSize};
      size_t sizes[1] = {kSize};
      int tags[1] = {0};
      uint32_t keys[1] = {rkey};
      Request* r = nullptr;
      REQUIRE(p.receiver->irecv(1, data, sizes, tags, keys, &r));
      if (r) recvs.push_back({r, posted++});
    }
    if (sent < posted) {
      Request* s = nullptr;
      const int size = kSize - sent % 7;  // each message a little shorter than its buffer
      REQUIRE(p.sender->isend(src.data() + (size_t)sent * kSize, size, 0, skey, &s));
      if (s) sends.push_back({s, sent++});
    }
    if (!sends.empty()) {
      int done = 0;
      REQUIRE(p.sender->test(sends.front().first, &done, nullptr));
      if (done) sends.pop_front();
    }
    if (!recvs.empty()) {
      int done = 0, size = -1;
      REQUIRE(p.receiver->test(recvs.front().first, &done, &size));
      if (done) {
        const int m = recvs.front().second;
        CHECK(m == received);
        CHECK(size == kSize - m % 7);
        CHECK(std::equal(src.begin() + (long)m * kSize, src.begin() + (long)m * kSize + size,
                         dst.begin() + (long)m * kSize));
        recvs.pop_front();
        received++;
      }
    }
  }
  CHECK(received == kMsgs);
  CHECK(p.receiver->inFlight() == 0);
}

namespace {
// A receive of 100 B with tag 1 (its remote key off by keyOffset), then a send of `size` B with `tag`, posted until
// the clear-to-send entry is there and tested until done, or until a call fails: the sender's error, "" if none.
std::string sendOnce(Pair& p, size_t size, int tag, uint32_t keyOffset) {
  std::vector<char> dst(100), src(size);
  void* data[1] = {dst.data()};
  size_t sizes[1] = {dst.size()};
  int tags[1] = {1};
  uint32_t keys[1] = {p.fabric.registerMemory(dst.data(), dst.size()) + keyOffset};
  Request *rr = nullptr, *sr = nullptr;
  REQUIRE(p.receiver->irecv(1, data, sizes, tags, keys, &rr));
  const uint32_t skey = p.fabric.registerMemory(src.data(), src.size());
  bool ok = true;
  for (int i = 0; i < 100000 && ok && !sr; i++) ok = p.sender->isend(src.data(), src.size(), tag, skey, &sr);
  int done = 0;
  for (int i = 0; i < 100000 && ok && sr && !done; i++) ok = p.sender->test(sr, &done, nullptr);
  return p.sender->error();
}
}  // namespace

TEST_CASE("net-ib engine: a send larger than its receive buffer, a wrong key and an unmatched tag fail with a reason") {
  Pair fits(1, 2);
  CHECK(sendOnce(fits, 100, 1, 0).empty());
  Pair larger(1, 3);
  CHECK(sendOnce(larger, 200, 1, 0).find("a send of 200 B is larger than the receive buffer of 100 B") !=
        std::string::npos);
  Pair badKey(1, 4);  // a remote key that covers nothing
  CHECK(sendOnce(badKey, 50, 1, 1000).find("remote access error") != std::string::npos);
  Pair otherTag(1, 5);
  CHECK(sendOnce(otherTag, 50, 2, 0).find("no buffer left for tag 2") != std::string::npos);
}

TEST_CASE("net-ib engine: a flush reads back one byte of each buffer on the loopback queue pair") {
  Pair p(2, 9);
  std::vector<char> a(64, 'a'), b(64, 'b');
  void* data[2] = {a.data(), b.data()};
  uint32_t keys[2] = {p.fabric.registerMemory(a.data(), a.size()), p.fabric.registerMemory(b.data(), b.size())};
  Request* f = nullptr;
  REQUIRE(p.receiver->iflush(2, data, keys, &f));
  REQUIRE(f);
  REQUIRE(waitFor(*p.receiver, f, nullptr));
  CHECK((char)(p.recvShared->flush & 0xff) == 'b');  // the last read landed there
}
