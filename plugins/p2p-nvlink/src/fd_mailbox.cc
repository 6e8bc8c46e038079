#include "fd_mailbox.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

namespace p2p {

namespace {

constexpr uint32_t kMagic = 0x50584644;  // "PXFD"
constexpr uint32_t kVersion = 1;
constexpr size_t kMaxDiscarded = 4096;

struct Wire {
  uint32_t magic;
  uint32_t version;
  uint64_t tag;
  uint32_t size;
  uint32_t hasFd;
  char payload[FdMailbox::kMaxPayload];
};

socklen_t address(uint64_t id, sockaddr_un* a) {
  memset(a, 0, sizeof(*a));
  a->sun_family = AF_UNIX;
  // Abstract namespace: sun_path[0] is NUL; the name needs no file and goes with the last socket closed.
  const int n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "plexus-p2p-%016llx", (unsigned long long)id);
  return (socklen_t)(offsetof(sockaddr_un, sun_path) + 1 + n);
}

uint64_t random64() {
  static std::mutex mu;
  static std::mt19937_64 gen([] {
    std::random_device rd;
    return ((uint64_t)rd() << 32) ^ rd() ^ ((uint64_t)getpid() << 16);
  }());
  std::lock_guard<std::mutex> lock(mu);
  return gen();
}

std::string errnoText(const char* what) { return std::string(what) + ": " + strerror(errno); }

}  // namespace

uint64_t newAllocationId() {
  for (;;) {
    const uint64_t id = random64() & ~(uint64_t)3;
    if (id) return id;
  }
}

std::unique_ptr<FdMailbox> FdMailbox::open(std::string* why) {
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    *why = errnoText("socket(AF_UNIX, SOCK_DGRAM)");
    return nullptr;
  }
  for (int attempt = 0; attempt < 16; attempt++) {
    const uint64_t id = random64() | 1;  // never 0: 0 means "no mailbox" in connect info
    sockaddr_un a;
    const socklen_t len = address(id, &a);
    if (bind(fd, (sockaddr*)&a, len) == 0) return std::unique_ptr<FdMailbox>(new FdMailbox(fd, id));
    if (errno != EADDRINUSE) break;
  }
  *why = errnoText("bind of an abstract Unix socket");
  close(fd);
  return nullptr;
}

FdMailbox* FdMailbox::process(std::string* why) {
  static std::mutex mu;
  static FdMailbox* box = nullptr;  // never destroyed: connections may use it while the process exits
  static pid_t owner = 0;
  std::lock_guard<std::mutex> lock(mu);
  if (box && owner == getpid()) return box;
  if (box) {
    // A child of fork: the socket is the parent's. Let go of the copy (the parent keeps its own).
    close(box->fd_);
    for (auto& [tag, m] : box->box_)
      if (m.fd >= 0) close(m.fd);
    box->fd_ = -1;
    box->box_.clear();
    box = nullptr;  // leaked on purpose: another thread of the parent may have held it when fork ran
  }
  std::unique_ptr<FdMailbox> made = open(why);
  if (!made) return nullptr;
  box = made.release();
  owner = getpid();
  return box;
}

FdMailbox::~FdMailbox() {
  if (fd_ >= 0) close(fd_);
  for (auto& [tag, m] : box_)
    if (m.fd >= 0) close(m.fd);
}

FdMailbox::Status FdMailbox::send(uint64_t to, uint64_t tag, const void* payload, size_t size, int fd,
                                  std::string* why) {
  if (size > kMaxPayload) {
    *why = "a message of " + std::to_string(size) + " bytes is longer than " + std::to_string(kMaxPayload);
    return Status::Failed;
  }
  Wire w{};
  w.magic = kMagic;
  w.version = kVersion;
  w.tag = tag;
  w.size = (uint32_t)size;
  w.hasFd = fd >= 0;
  if (size) memcpy(w.payload, payload, size);
  sockaddr_un a;
  const socklen_t alen = address(to, &a);
  iovec iov{&w, offsetof(Wire, payload) + size};
  msghdr msg{};
  msg.msg_name = &a;
  msg.msg_namelen = alen;
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  if (fd >= 0) {
    memset(control, 0, sizeof(control));
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  for (;;) {
    if (sendmsg(fd_, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0) return Status::Done;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) return Status::Pending;
    if (errno == ECONNREFUSED || errno == ENOENT) {
      char name[40];
      snprintf(name, sizeof(name), "@plexus-p2p-%016llx", (unsigned long long)to);
      *why = std::string("the peer process's socket ") + name + " is gone (" + strerror(errno) +
             "): the peer process ended, or runs in another network namespace (abstract Unix sockets do not cross "
             "network namespaces)";
    } else {
      *why = errnoText("sendmsg on the Unix socket");
    }
    return Status::Failed;
  }
}

FdMailbox::Status FdMailbox::drainLocked(std::string* why) {
  for (;;) {
    Wire w;
    iovec iov{&w, sizeof(w)};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t n = recvmsg(fd_, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::Done;
      *why = errnoText("recvmsg on the Unix socket");
      return Status::Failed;
    }
    // Every descriptor that came, whatever the message: a stray one is closed rather than leaked.
    int fds[8];
    int nfds = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count && nfds < 8; i++) memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
    }
    const bool wellFormed = (size_t)n >= offsetof(Wire, payload) && w.magic == kMagic && w.version == kVersion &&
                            w.size <= kMaxPayload && (size_t)n == offsetof(Wire, payload) + w.size &&
                            !(msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) && nfds == (w.hasFd ? 1 : 0);
    if (!wellFormed || discarded_.count(w.tag) || box_.count(w.tag)) {
      // Not ours (another program on the socket), for a connection gone, or a second message under one tag.
      for (int i = 0; i < nfds; i++) close(fds[i]);
      continue;
    }
    Message m;
    m.size = w.size;
    memcpy(m.payload, w.payload, w.size);
    m.fd = nfds ? fds[0] : -1;
    box_.emplace(w.tag, m);
  }
}

FdMailbox::Status FdMailbox::take(uint64_t tag, Message* out, std::string* why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (drainLocked(why) == Status::Failed) return Status::Failed;
  auto it = box_.find(tag);
  if (it == box_.end()) return Status::Pending;
  *out = it->second;
  box_.erase(it);
  return Status::Done;
}

void FdMailbox::discard(uint64_t tag) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string ignored;
  drainLocked(&ignored);
  auto it = box_.find(tag);
  if (it != box_.end()) {
    if (it->second.fd >= 0) close(it->second.fd);
    box_.erase(it);
    return;  // it came: nothing more will
  }
  if (discarded_.size() >= kMaxDiscarded) discarded_.erase(discarded_.begin());
  discarded_.insert(tag);
}

size_t FdMailbox::waiting() {
  std::lock_guard<std::mutex> lock(mu_);
  std::string ignored;
  drainLocked(&ignored);
  return box_.size();
}

}  // namespace p2p
