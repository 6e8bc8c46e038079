// File descriptors (and small messages) between processes of one machine, for CUDA connections: a cuMem allocation
// travels to the peer process as the file descriptor cuMemExportToShareableHandle gives, which only a Unix domain
// socket can carry (SCM_RIGHTS). Each process has one datagram socket, bound in the abstract namespace under a random
// 64-bit id that the connect info carries; every message is tagged (an allocation's id and a phase), so that several
// connections, of several communicators, may be in flight at once and arrive in any order. Whoever waits for a
// message drains the socket into the process's mailbox and looks for its tag there: nothing ever blocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

namespace p2p {

class FdMailbox {
 public:
  static constexpr size_t kMaxPayload = 192;

  struct Message {
    uint32_t size = 0;
    char payload[kMaxPayload] = {};
    int fd = -1;  // owned by whoever took the message
  };
  enum class Status { Done, Pending, Failed };

  // A new socket (tests make several in one process); nullptr and *why when the socket cannot be made.
  static std::unique_ptr<FdMailbox> open(std::string* why);
  // The process's mailbox, made on first use (again in a child after fork: a socket inherited from the parent is
  // the parent's); nullptr and *why when it cannot be made.
  static FdMailbox* process(std::string* why);

  ~FdMailbox();
  FdMailbox(const FdMailbox&) = delete;
  FdMailbox& operator=(const FdMailbox&) = delete;

  uint64_t id() const { return id_; }

  // Sends payload (at most kMaxPayload bytes) and, when fd >= 0, a duplicate of fd to the mailbox `to`. Pending: the
  // peer's queue is full, send again later; Failed (*why): the peer's socket is gone (the process ended, or lives in
  // another network namespace) or the message is wrong. The caller keeps fd.
  Status send(uint64_t to, uint64_t tag, const void* payload, size_t size, int fd, std::string* why);
  // The message tagged `tag`, once it arrived (Done: *out owns its fd); Pending until then; Failed (*why) when the
  // socket itself fails.
  Status take(uint64_t tag, Message* out, std::string* why);
  // Forgets tag: a message that came or comes with it is dropped (its fd closed), e.g. for a connection freed before
  // its peer's message arrived.
  void discard(uint64_t tag);
  // Messages received and not taken (tests).
  size_t waiting();

 private:
  FdMailbox(int fd, uint64_t id) : fd_(fd), id_(id) {}
  Status drainLocked(std::string* why);

  int fd_;
  uint64_t id_;
  std::mutex mu_;
  std::map<uint64_t, Message> box_;
  std::set<uint64_t> discarded_;
};

// A tag of allocation id's messages: ids have their low two bits clear, the phase fills them.
inline uint64_t mailboxTag(uint64_t id, unsigned phase) { return (id & ~(uint64_t)3) | (phase & 3); }
// A fresh allocation id, unique on the machine for all practical purposes (random, low two bits clear, never 0).
uint64_t newAllocationId();

}  // namespace p2p
