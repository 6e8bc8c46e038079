// fd_mailbox.h: one datagram socket per process, messages tagged by allocation, file descriptors passed with
// SCM_RIGHTS, never blocking.
#include <doctest/doctest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "fd_mailbox.h"

using p2p::FdMailbox;
using Status = FdMailbox::Status;

namespace {

// A memfd holding text: passing it shows that the receiver got the very file.
int fileWith(const char* text) {
  const int fd = memfd_create("mailbox-test", MFD_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
  return fd;
}

std::string contents(int fd) {
  char buf[64] = {};
  const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  return n > 0 ? std::string(buf, (size_t)n) : std::string();
}

std::unique_ptr<FdMailbox> box() {
  std::string why;
  auto b = FdMailbox::open(&why);
  INFO(why);
  REQUIRE(b);
  return b;
}

// Takes tag, polling for up to a second (a datagram is in the receiver's queue once sendmsg returned, but be kind).
Status takeSoon(FdMailbox& b, uint64_t tag, FdMailbox::Message* m) {
  std::string why;
  for (int i = 0; i < 1000; i++) {
    const Status s = b.take(tag, m, &why);
    if (s != Status::Pending) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return Status::Pending;
}

}  // namespace

TEST_CASE("mailbox: tags, out-of-order arrivals, several in flight, descriptors") {
  auto a = box(), b = box();
  CHECK(a->id() != b->id());
  std::string why;
  const uint64_t id1 = p2p::newAllocationId(), id2 = p2p::newAllocationId(), id3 = p2p::newAllocationId();
  CHECK((id1 & 3) == 0);
  CHECK(p2p::mailboxTag(id1, 2) == (id1 | 2));
  const int f2 = fileWith("second"), f3 = fileWith("third");
  // Sent 3, 2, 1 (with phases), taken 1, 2, 3: each waits for its own tag only.
  REQUIRE(a->send(b->id(), p2p::mailboxTag(id3, 1), "three", 6, f3, &why) == Status::Done);
  REQUIRE(a->send(b->id(), p2p::mailboxTag(id2, 0), "two", 4, f2, &why) == Status::Done);
  REQUIRE(a->send(b->id(), p2p::mailboxTag(id1, 0), "one", 4, -1, &why) == Status::Done);
  close(f2);
  close(f3);
  FdMailbox::Message m;
  REQUIRE(takeSoon(*b, p2p::mailboxTag(id1, 0), &m) == Status::Done);
  CHECK(std::string(m.payload) == "one");
  CHECK(m.fd == -1);
  CHECK(b->waiting() == 2);  // the other two arrived with it, and wait for their takers
  REQUIRE(takeSoon(*b, p2p::mailboxTag(id2, 0), &m) == Status::Done);
  CHECK(std::string(m.payload) == "two");
  REQUIRE(m.fd >= 0);
  CHECK(contents(m.fd) == "second");
  close(m.fd);
  CHECK(b->take(p2p::mailboxTag(id3, 0), &m, &why) == Status::Pending);  // same allocation, another phase
  REQUIRE(takeSoon(*b, p2p::mailboxTag(id3, 1), &m) == Status::Done);
  CHECK(contents(m.fd) == "third");
  close(m.fd);
  CHECK(b->waiting() == 0);
  // Both ways at once.
  REQUIRE(b->send(a->id(), 8, "back", 5, -1, &why) == Status::Done);
  REQUIRE(takeSoon(*a, 8, &m) == Status::Done);
  CHECK(std::string(m.payload) == "back");
}

TEST_CASE("mailbox: a message that never comes is pending until the caller's deadline") {
  auto b = box();
  std::string why;
  FdMailbox::Message m;
  const auto start = std::chrono::steady_clock::now();
  int polls = 0, pending = 0;
  while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(300)) {
    pending += b->take(12345 << 2, &m, &why) == Status::Pending;
    polls++;
  }
  CHECK(pending == polls);
  CHECK(polls > 10);  // each poll returned at once
}

TEST_CASE("mailbox: a peer's socket that is gone fails the send with a reason") {
  auto a = box();
  uint64_t goneId = 0;
  {
    auto c = box();
    goneId = c->id();
  }
  std::string why;
  CHECK(a->send(goneId, 4, "x", 1, -1, &why) == Status::Failed);
  CHECK(why.find("is gone") != std::string::npos);
  CHECK(why.find("network namespace") != std::string::npos);
  CHECK(a->send(goneId, 4, "x", FdMailbox::kMaxPayload + 1, -1, &why) == Status::Failed);
  CHECK(why.find("longer than") != std::string::npos);
}

TEST_CASE("mailbox: a full queue answers pending, never blocks, and drains") {
  auto a = box(), b = box();
  std::string why;
  int sent = 0;
  Status s = Status::Done;
  for (; sent < 200000 && (s = a->send(b->id(), (uint64_t)(sent + 1) << 2, "fill", 5, -1, &why)) == Status::Done;
       sent++) {
  }
  REQUIRE(s == Status::Pending);
  CHECK(sent > 0);
  FdMailbox::Message m;
  REQUIRE(b->take(4, &m, &why) == Status::Done);  // drains every queued message into the mailbox
  CHECK(b->waiting() == (size_t)sent - 1);
  CHECK(a->send(b->id(), 3 << 2 | 1, "more", 5, -1, &why) == Status::Done);
}

TEST_CASE("mailbox: discarded tags drop late arrivals, strangers' datagrams are ignored") {
  auto a = box(), b = box();
  std::string why;
  b->discard(40);
  const int f = fileWith("late");
  REQUIRE(a->send(b->id(), 40, "late", 5, f, &why) == Status::Done);
  close(f);
  // A datagram that is not a mailbox message, straight to b's address.
  const int raw = socket(AF_UNIX, SOCK_DGRAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const int n =
      snprintf(addr.sun_path + 1, sizeof(addr.sun_path) - 1, "plexus-p2p-%016llx", (unsigned long long)b->id());
  REQUIRE(sendto(raw, "garbage!", 8, 0, (sockaddr*)&addr, (socklen_t)(offsetof(sockaddr_un, sun_path) + 1 + n)) == 8);
  close(raw);
  REQUIRE(a->send(b->id(), 44, "good", 5, -1, &why) == Status::Done);
  FdMailbox::Message m;
  REQUIRE(takeSoon(*b, 44, &m) == Status::Done);
  CHECK(b->waiting() == 0);
  CHECK(b->take(40, &m, &why) == Status::Pending);
}

TEST_CASE("mailbox: two processes, descriptors both ways, the process's mailbox renewed after fork") {
  std::string why;
  FdMailbox* mine = FdMailbox::process(&why);
  REQUIRE(mine);
  CHECK(FdMailbox::process(&why) == mine);
  int p[2];
  REQUIRE(pipe(p) == 0);
  const uint64_t parentId = mine->id();
  const pid_t child = fork();
  if (child == 0) {
    // The child: its own mailbox; it sends two descriptors to the parent, then takes the parent's answer.
    std::string w;
    FdMailbox* box = FdMailbox::process(&w);
    if (!box || box->id() == parentId) _exit(2);
    const uint64_t id = box->id();
    if (write(p[1], &id, sizeof(id)) != sizeof(id)) _exit(3);
    const int f1 = memfd_create("c1", 0), f2 = memfd_create("c2", 0);
    if (write(f1, "from-child-1", 12) != 12 || write(f2, "from-child-2", 12) != 12) _exit(4);
    if (box->send(parentId, 100 << 2, "c2", 3, f2, &w) != Status::Done) _exit(5);
    if (box->send(parentId, 101 << 2, "c1", 3, f1, &w) != Status::Done) _exit(6);
    FdMailbox::Message m;
    for (int i = 0; i < 5000; i++) {
      if (box->take(7 << 2, &m, &w) == Status::Done) {
        char buf[16] = {};
        _exit(m.fd >= 0 && pread(m.fd, buf, 15, 0) == 11 && std::string(buf) == "from-parent" ? 0 : 7);
      }
      usleep(1000);
    }
    _exit(8);
  }
  uint64_t childId = 0;
  REQUIRE(read(p[0], &childId, sizeof(childId)) == sizeof(childId));
  CHECK(childId != parentId);
  FdMailbox::Message m;
  REQUIRE(takeSoon(*mine, 101 << 2, &m) == Status::Done);
  CHECK(contents(m.fd) == "from-child-1");
  close(m.fd);
  REQUIRE(takeSoon(*mine, 100 << 2, &m) == Status::Done);
  CHECK(contents(m.fd) == "from-child-2");
  close(m.fd);
  const int f = fileWith("from-parent");
  CHECK(mine->send(childId, 7 << 2, "", 0, f, &why) == Status::Done);
  close(f);
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  close(p[0]);
  close(p[1]);
}
