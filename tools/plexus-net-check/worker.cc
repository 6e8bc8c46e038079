// The worker process: opens the plugin, runs one side of one rule, reports its verdict. See netcheck.h.
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <set>
#include <string>

#include "misc/debug.h"
#include "netcheck.h"

namespace netcheck {

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// ---- reports to the orchestrator ----

namespace {

int reportFd = -1;
char stepText[256] = "starting";  // the last step(), for the watchdog's report
// The plugin call in progress, what NCCL expects of it, and the bound: read by the watchdog's handler.
const char* volatile callInProgress = nullptr;
const char* volatile callExpectation = nullptr;
char boundText[64] = "the rule's bound";

void writeAll(const char* p, size_t n) {
  while (n) {
    ssize_t k = send(reportFd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) _exit(3);  // the orchestrator is gone: nobody to report to
    p += k, n -= k;
  }
}

void emit(const char* kind, const char* fmt, va_list ap) {
  char text[2048];
  vsnprintf(text, sizeof text, fmt, ap);
  for (char* c = text; *c; c++)
    if (*c == '\n') *c = ' ';  // one line per report
  std::string line = std::string(kind) + " " + text + "\n";
  writeAll(line.data(), line.size());
}

[[noreturn]] void verdict(const char* kind, int code, const char* fmt, va_list ap) {
  emit(kind, fmt, ap);
  fflush(nullptr);
  _exit(code);  // no destructors, no atexit: the plugin may be in no state to clean up
}

// A plugin call that has not returned by the deadline: report it by name, from the signal handler (only
// async-signal-safe calls), and end the process.
void onWatchdog(int) {
  char line[1024];
  size_t n = 0;
  auto add = [&](const char* s) {
    while (s && *s && n < sizeof line - 2) line[n++] = *s++;
  };
  if (const char* call = callInProgress) {
    add("FAIL ");
    add(call);
    add("() did not return within ");
    add(boundText);
    if (const char* expect = callExpectation) add("; "), add(expect);
  } else {
    add("FAIL no progress within ");
    add(boundText);
    add(" (at: ");
    add(stepText);
    add(")");
  }
  line[n++] = '\n';
  ssize_t ignored = send(reportFd, line, n, MSG_NOSIGNAL);
  (void)ignored;
  _exit(1);
}

// Marks a plugin call in progress for the watchdog.
class Watched {
 public:
  Watched(const char* call, const char* expectation) {
    callExpectation = expectation;
    callInProgress = call;
  }
  ~Watched() { callInProgress = nullptr; }
};

constexpr const char* kAtOnce = "NCCL's proxy thread calls it in a loop with others, so it must return at once";
constexpr const char* kConnectAtOnce =
    "NCCL calls it again and again: it must return at once, with a NULL comm until the connection is ready";
constexpr const char* kPostAtOnce = "it must return at once (a NULL request asks NCCL to retry later)";
constexpr const char* kMustReturn = "it must return, whatever the peer does";

}  // namespace

void step(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(stepText, sizeof stepText, fmt, ap);
  va_end(ap);
  std::string line = std::string("STEP ") + stepText + "\n";
  writeAll(line.data(), line.size());
}

void note(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit("NOTE", fmt, ap);
  va_end(ap);
}

void row(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit("ROW", fmt, ap);
  va_end(ap);
}

void pass(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  verdict("PASS", 0, fmt, ap);
}
void fail(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  verdict("FAIL", 1, fmt, ap);
}
void skip(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  verdict("SKIP", 0, fmt, ap);
}
void lost(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  verdict("LOST", 1, fmt, ap);
}

const char* resultName(ncclResult_t r) {
  static const char* names[] = {"ncclSuccess (0)",       "ncclUnhandledCudaError (1)", "ncclSystemError (2)",
                                "ncclInternalError (3)", "ncclInvalidArgument (4)",    "ncclInvalidUsage (5)",
                                "ncclRemoteError (6)",   "ncclInProgress (7)",         "ncclTimeout (8)"};
  static char other[32];
  if ((int)r >= 0 && (int)r < (int)(sizeof names / sizeof names[0])) return names[r];
  snprintf(other, sizeof other, "%d (not an ncclResult_t)", (int)r);
  return other;
}

void require(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) fail("%s returned %s at step '%s'; expected ncclSuccess", what, resultName(r), stepText);
}

// ---- the worker's clock and the plugin's calls ----

void Worker::restartClock() {
  deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt.timeout));
  snprintf(boundText, sizeof boundText, "the bound of %.1f s (--timeout)", opt.timeout);
  // The watchdog fires a little after the deadline, so that every wait of ours, which ends at the
  // deadline, reports first; what is left is a plugin call that never returned.
  double fire = opt.timeout + 0.5;
  itimerval t{};
  t.it_value.tv_sec = (time_t)fire;
  t.it_value.tv_usec = (suseconds_t)((fire - (double)(time_t)fire) * 1e6);
  setitimer(ITIMER_REAL, &t, nullptr);
}

namespace {
// The plugin's last log line, the reason a plugin gives for having no device.
char lastPluginLine[512];
void recordingLogger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  char text[sizeof lastPluginLine];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  if (level == NCCL_LOG_WARN || level == NCCL_LOG_INFO) memcpy(lastPluginLine, text, sizeof text);
  plexus::debugLog(level, flags, file, line, "%s", text);
}
}  // namespace

ncclResult_t Worker::init(void** context, uint64_t id) {
  Watched watch("init", kMustReturn);
  ncclNetCommConfig_v12_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
  return net->init(context, id, &config, recordingLogger);
}
ncclResult_t Worker::finalize(void* context) {
  Watched watch("finalize", kMustReturn);
  return net->finalize(context);
}
ncclResult_t Worker::devices(int* n) {
  Watched watch("devices", kMustReturn);
  return net->devices(n);
}
ncclResult_t Worker::getProperties(int dev, ncclNetProperties_v12_t* p) {
  Watched watch("getProperties", kMustReturn);
  return net->getProperties(dev, p);
}
ncclResult_t Worker::listen(void* handle, void** listenComm) {
  Watched watch("listen", "NCCL calls it before the peer knows the handle, so it must not wait for the peer");
  return net->listen(ctx, opt.device, handle, listenComm);
}
ncclResult_t Worker::connect(void* handle, void** sendComm) {
  Watched watch("connect", kConnectAtOnce);
  return net->connect(ctx, opt.device, handle, sendComm);
}
ncclResult_t Worker::accept(void* listenComm, void** recvComm) {
  Watched watch("accept", kConnectAtOnce);
  return net->accept(listenComm, recvComm);
}
ncclResult_t Worker::regMr(void* comm, void* data, size_t size, void** mhandle) {
  Watched watch("regMr", kMustReturn);
  return net->regMr(comm, data, size, NCCL_PTR_HOST, mhandle);
}
ncclResult_t Worker::deregMr(void* comm, void* mhandle) {
  Watched watch("deregMr", kMustReturn);
  return net->deregMr(comm, mhandle);
}
ncclResult_t Worker::isend(void* comm, void* data, size_t size, int tag, void* mhandle, void** request) {
  Watched watch("isend", kPostAtOnce);
  return net->isend(comm, data, size, tag, mhandle, nullptr, request);
}
ncclResult_t Worker::irecv(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request) {
  Watched watch("irecv", kPostAtOnce);
  return net->irecv(comm, n, data, sizes, tags, mhandles, nullptr, request);
}
ncclResult_t Worker::iflush(void* comm, int n, void** data, int* sizes, void** mhandles, void** request) {
  Watched watch("iflush", kAtOnce);
  return net->iflush(comm, n, data, sizes, mhandles, request);
}
ncclResult_t Worker::test(void* request, int* done, int* sizes) {
  Watched watch("test", "it must return at once, done or not");
  return net->test(request, done, sizes);
}
ncclResult_t Worker::closeSend(void* comm) {
  Watched watch("closeSend", kMustReturn);
  return net->closeSend(comm);
}
ncclResult_t Worker::closeRecv(void* comm) {
  Watched watch("closeRecv", kMustReturn);
  return net->closeRecv(comm);
}
ncclResult_t Worker::closeListen(void* comm) {
  Watched watch("closeListen", kMustReturn);
  return net->closeListen(comm);
}

// ---- the link to the peer worker ----

void Link::put(const void* data, size_t n) {
  auto* p = (const char*)data;
  while (n) {
    ssize_t k = send(fd_, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) lost("the peer process is gone (the link to it: %s)", k < 0 ? strerror(errno) : "closed");
    p += k, n -= (size_t)k;
  }
}

void Link::get(void* data, size_t n, const char* what) {
  auto* p = (char*)data;
  while (n) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline_ - Clock::now()).count();
    if (left <= 0)
      lost("the peer did not send its %s within the bound; waiting for it (the peer's report says why)", what);
    pollfd pfd{fd_, POLLIN, 0};
    int r = poll(&pfd, 1, (int)std::min<long long>(left, 1000));
    if (r < 0 && errno != EINTR) lost("poll on the link to the peer failed: %s", strerror(errno));
    if (r <= 0) continue;
    ssize_t k = recv(fd_, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) lost("the peer process ended before sending its %s", what);
    p += k, n -= (size_t)k;
  }
}

void Link::expect(char code, const char* what) {
  char got = 0;
  get(&got, 1, what);
  if (got != code) fail("the peer sent '%c' where its %s ('%c') was due: the two workers disagree", got, what, code);
}

bool Link::ready() const {
  pollfd pfd{fd_, POLLIN, 0};
  return poll(&pfd, 1, 0) > 0;
}

bool Link::waitClosed(Clock::time_point until) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
    if (left <= 0) return false;
    pollfd pfd{fd_, POLLIN, 0};
    int r = poll(&pfd, 1, (int)std::min<long long>(left, 1000));
    if (r <= 0) continue;
    char c;
    ssize_t k = recv(fd_, &c, 1, 0);
    if (k == 0 || (k < 0 && errno != EINTR)) return true;
  }
}

// ---- memory, registrations, connections ----

HostMemory::HostMemory(size_t bytes) : size_(bytes) {
  void* p = mmap(nullptr, std::max<size_t>(bytes, 1), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) fail("cannot map %s of host memory: %s", bytesText(bytes).c_str(), strerror(errno));
  data_ = (char*)p;
  // Written once here, not first by the plugin inside the table's timing: a hypervisor may back a page only at its
  // first write, populated or not (this VM: about 5 us a page, which took the 1-4 MiB rows, whose 32 slots were
  // fresh memory, from 3 GB/s to 0.6-0.9).
  memset(data_, 0, bytes);
}

HostMemory::~HostMemory() { munmap(data_, std::max<size_t>(size_, 1)); }

Registration::Registration(Worker& w, void* comm, void* data, size_t size) : w_(w), comm_(comm) {
  char what[96];
  snprintf(what, sizeof what, "regMr(NCCL_PTR_HOST, %s)", bytesText(size).c_str());
  require(w.regMr(comm, data, size, &mhandle_), what);
  registered_ = true;
}

void Registration::release() {
  if (registered_) require(drop(), "deregMr");
}

ncclResult_t Registration::drop() {
  if (!registered_) return ncclSuccess;
  registered_ = false;
  return w_.deregMr(comm_, mhandle_);
}

Connection::~Connection() {
  closeRecv();
  closeSend();
  closeListen();
}

void Connection::listen() {
  require(w_.listen(handle, &listenComm), "listen");
  if (!listenComm) fail("listen returned ncclSuccess and a NULL listenComm; NCCL needs a non-NULL one to accept on");
}

bool Connection::acceptOnce() {
  auto t0 = Clock::now();
  acceptCalls++;
  require(w_.accept(listenComm, &recvComm), "accept");
  slowestCall = std::max(slowestCall, secondsSince(t0));
  return recvComm != nullptr;
}

bool Connection::connectOnce(void* peerHandle) {
  auto t0 = Clock::now();
  connectCalls++;
  require(w_.connect(peerHandle, &sendComm), "connect");
  slowestCall = std::max(slowestCall, secondsSince(t0));
  return sendComm != nullptr;
}

void Connection::closeSend() {
  if (!sendComm) return;
  require(w_.closeSend(sendComm), "closeSend");
  sendComm = nullptr;
}
void Connection::closeRecv() {
  if (!recvComm) return;
  require(w_.closeRecv(recvComm), "closeRecv");
  recvComm = nullptr;
}
void Connection::closeListen() {
  if (!listenComm) return;
  require(w_.closeListen(listenComm), "closeListen");
  listenComm = nullptr;
}

void* establish(Worker& w, Connection& c, bool keepListen) {
  if (w.role == Role::Receiver) {
    step("listen");
    c.listen();
    w.link.put(c.handle, sizeof c.handle);
    step("accept until the recvComm is there");
    while (!c.acceptOnce()) {
      if (w.expired())
        fail(
            "accept gave a NULL comm %d times in %.1f s while the sender was connecting; expected the comm within the "
            "bound",
            c.acceptCalls, w.opt.timeout);
      sched_yield();
    }
    if (!keepListen) c.closeListen();
    return c.recvComm;
  }
  w.link.get(c.handle, sizeof c.handle, "listen handle");
  step("connect until the sendComm is there");
  while (!c.connectOnce(c.handle)) {
    if (w.expired())
      fail(
          "connect gave a NULL comm %d times in %.1f s while the receiver was accepting; expected the comm within the "
          "bound",
          c.connectCalls, w.opt.timeout);
    sched_yield();
  }
  return c.sendComm;
}

// ---- requests ----

void* trySend(Worker& w, void* comm, void* data, size_t size, int tag, void* mhandle) {
  void* request = nullptr;
  w.count.isendCalls++;
  require(w.isend(comm, data, size, tag, mhandle, &request), "isend");
  if (!request) w.count.isendNull++;
  return request;
}

void* tryRecv(Worker& w, void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles) {
  void* request = nullptr;
  w.count.irecvCalls++;
  require(w.irecv(comm, n, data, sizes, tags, mhandles, &request), "irecv");
  if (!request) w.count.irecvNull++;
  return request;
}

void* postSend(Worker& w, void* comm, void* data, size_t size, int tag, void* mhandle, const char* what) {
  for (long nulls = 0;; nulls++) {
    if (void* r = trySend(w, comm, data, size, tag, mhandle)) return r;
    if (w.expired())
      fail("isend of %s gave a NULL request %ld times in %.1f s; a NULL request means \"retry later\", not never", what,
           nulls + 1, w.opt.timeout);
    sched_yield();
  }
}

void* postRecv(Worker& w, void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, const char* what) {
  for (long nulls = 0;; nulls++) {
    if (void* r = tryRecv(w, comm, n, data, sizes, tags, mhandles)) return r;
    if (w.expired())
      fail("irecv of %s gave a NULL request %ld times in %.1f s; a NULL request means \"retry later\", not never", what,
           nulls + 1, w.opt.timeout);
    sched_yield();
  }
}

bool testOnce(Worker& w, void* request, int* sizes, const char* what) {
  int done = 0;
  w.count.testCalls++;
  ncclResult_t r = w.test(request, &done, sizes);
  if (r != ncclSuccess) fail("test of %s returned %s; expected ncclSuccess", what, resultName(r));
  return done != 0;
}

long waitDone(Worker& w, void* request, int* sizes, const char* what) {
  for (long calls = 1;; calls++) {
    if (testOnce(w, request, sizes, what)) return calls;
    if (w.expired()) fail("%s was not done after %ld test calls in %.1f s", what, calls, w.opt.timeout);
    sched_yield();
  }
}

void pipeline(Worker& w, int count, int window, const std::function<void*(int)>& post,
              const std::function<void(int, const int*)>& done, const char* what) {
  std::deque<std::pair<int, void*>> inflight;
  std::vector<int> sizes((size_t)w.maxRecvs());
  int next = 0, completed = 0;
  long nullsInARow = 0;
  while (completed < count) {
    bool progress = false;
    while (next < count && (int)inflight.size() < window) {
      void* r = post(next);
      if (!r) {
        nullsInARow++;
        break;
      }
      inflight.emplace_back(next++, r);
      nullsInARow = 0;
      progress = true;
    }
    if (!inflight.empty()) {
      std::fill(sizes.begin(), sizes.end(), -1);
      if (testOnce(w, inflight.front().second, sizes.data(), what)) {
        done(inflight.front().first, sizes.data());
        inflight.pop_front();
        completed++;
        progress = true;
      }
    }
    if (progress) continue;
    if (w.expired()) {
      if (inflight.empty())
        fail("%s: request %d of %d was never posted: a NULL request %ld times in %.1f s (%d done before it)", what,
             next + 1, count, nullsInARow, w.opt.timeout, completed);
      fail("%s: request %d of %d was not done within %.1f s of tests (%d done before it, %zu in flight)", what,
           inflight.front().first + 1, count, w.opt.timeout, completed, inflight.size());
    }
    sched_yield();
  }
}

// ---- message contents and streams ----

namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
  x ^= x >> 30, x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27, x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t patternWord(uint32_t id, size_t k) { return mix(((uint64_t)id << 40) ^ k ^ 0x5eed); }

// The offset of the first byte of data[0..n) that is not message id's, or n.
size_t firstMismatch(const void* data, size_t n, uint32_t id) {
  auto* p = (const unsigned char*)data;
  for (size_t k = 0; k * 8 < n; k++) {
    uint64_t v = patternWord(id, k);
    size_t len = std::min<size_t>(8, n - k * 8);
    if (memcmp(p + k * 8, &v, len))
      for (size_t b = 0; b < len; b++)
        if (p[k * 8 + b] != ((const unsigned char*)&v)[b]) return k * 8 + b;
  }
  return n;
}

size_t roundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

void fillPattern(void* data, size_t n, uint32_t id) {
  auto* p = (unsigned char*)data;
  for (size_t k = 0; k * 8 < n; k++) {
    uint64_t v = patternWord(id, k);
    memcpy(p + k * 8, &v, std::min<size_t>(8, n - k * 8));
  }
}

bool matchesPattern(const void* data, size_t n, uint32_t id) { return firstMismatch(data, n, id) == n; }

void sendStream(Worker& w, void* comm, const std::vector<Message>& msgs, int window, int tag) {
  size_t slot = 64;
  for (auto& m : msgs) slot = std::max(slot, roundUp(m.size, 64));
  step("sending %zu messages, %d in flight", msgs.size(), window);
  HostMemory mem(slot * (size_t)window);
  Registration reg(w, comm, mem.data(), mem.size());
  int filled = -1;
  pipeline(
      w, (int)msgs.size(), window,
      [&](int i) {
        char* p = mem.data() + (size_t)(i % window) * slot;
        if (filled < i) fillPattern(p, msgs[i].size, msgs[i].id), filled = i;  // its slot's last send is done
        return trySend(w, comm, p, msgs[i].size, tag, reg.handle());
      },
      [](int, const int*) {}, "the sends");
}

void recvStream(Worker& w, void* comm, const std::vector<Message>& msgs, int window, int tag, size_t capacity) {
  step("receiving %zu messages, %d in flight", msgs.size(), window);
  size_t slot = roundUp(std::max<size_t>(capacity, 1), 64);
  HostMemory mem(slot * (size_t)window);
  Registration reg(w, comm, mem.data(), mem.size());
  const int n = (int)msgs.size();
  pipeline(
      w, n, window,
      [&](int i) {
        void* p = mem.data() + (size_t)(i % window) * slot;
        size_t size = capacity;
        int t = tag;
        void* mh = reg.handle();
        return tryRecv(w, comm, 1, &p, &size, &t, &mh);
      },
      [&](int i, const int* sizes) {
        const char* p = mem.data() + (size_t)(i % window) * slot;
        const Message& m = msgs[i];
        long got = sizes[0];
        if (got == (long)m.size && matchesPattern(p, m.size, m.id)) return;
        if (got < 0)
          fail("test reported receive %d of %d done without setting its size; expected %zu", i + 1, n, m.size);
        for (int j = 0; j < n && got > 0; j++)  // an empty receive cannot be told apart by its contents
          if (j != i && got == (long)msgs[j].size && matchesPattern(p, (size_t)got, msgs[j].id))
            fail(
                "receive %d of %d held message %d (%ld B); expected message %d (%zu B): sends and receives must match "
                "in the order they were posted",
                i + 1, n, j + 1, got, i + 1, m.size);
        if (got != (long)m.size)
          fail("receive %d of %d (%s posted) reported %ld B; expected %zu B, the size of the matching send", i + 1, n,
               bytesText(capacity).c_str(), got, m.size);
        fail("receive %d of %d reported the right size (%zu B) but holds other bytes from offset %zu on", i + 1, n,
             m.size, firstMismatch(p, m.size, m.id));
      },
      "the receives");
}

// ---- the worker process ----

namespace {

std::set<std::string> environment() {
  std::set<std::string> vars;
  for (char** e = environ; *e; e++) vars.insert(*e);
  return vars;
}

void setup(Worker& w) {
  step("opening the plugin");
  std::string report;
  w.plugin = w.opt.plugin == "socket" ? plexus::netPluginSocket() : plexus::netPluginOpen(w.opt.plugin, &report);
  if (!w.plugin || !w.plugin->api)
    fail("cannot use it: %s", report.empty() ? "netPluginOpen gave no reason" : report.c_str());
  w.net = w.plugin->api.get();
  step("init");
  const std::set<std::string> before = environment();
  require(w.init(&w.ctx, w.commId), "init");
  const std::set<std::string> after = environment();
  std::set<std::string> changed;
  for (const std::string& e : before)
    if (!after.count(e)) changed.insert(e.substr(0, e.find('=')));
  for (const std::string& e : after)
    if (!before.count(e)) changed.insert(e.substr(0, e.find('=')));
  for (const std::string& name : changed) w.envChanged += (w.envChanged.empty() ? "" : ", ") + name;
  step("devices");
  require(w.devices(&w.ndev), "devices");
  if (w.ndev < 1 && w.opt.skipWithoutDevice)
    skip("no device here: the plugin reported none%s%s", lastPluginLine[0] ? "; it said: " : "", lastPluginLine);
  if (w.ndev < 1) fail("devices reported %d; NCCL needs at least 1 (it passes over a plugin without)", w.ndev);
  if (w.opt.device >= w.ndev) fail("there is no device %d (--device): devices reported %d", w.opt.device, w.ndev);
  step("getProperties");
  require(w.getProperties(w.opt.device, &w.props), "getProperties");
}

}  // namespace

void workerMain(int argc, char** argv) {
  static Worker w;  // static: nothing of it is destroyed at _exit, and the link's deadline pointer stays valid
  if (argc < 7) {
    fprintf(stderr, "plexus-net-check: --worker <rule> <role> <linkFd> <reportFd> <commId> <options>\n");
    _exit(2);
  }
  reportFd = atoi(argv[5]);
  int linkFd = atoi(argv[4]);
  // Neither goes to what the plugin may start, so that their closing means this process ended.
  fcntl(reportFd, F_SETFD, FD_CLOEXEC);
  fcntl(linkFd, F_SETFD, FD_CLOEXEC);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  const Rule* rule = findRule(argv[2]);
  if (!rule) fail("there is no rule '%s'", argv[2]);
  w.role = !strcmp(argv[3], "sender") ? Role::Sender : Role::Receiver;
  w.commId = strtoull(argv[6], nullptr, 16);
  w.opt = parseOptions(argc, argv, 7);
  w.link = Link(linkFd, &w.deadline);
  struct sigaction sa {};
  sa.sa_handler = onWatchdog;
  sigaction(SIGALRM, &sa, nullptr);

  w.restartClock();
  setup(w);
  std::string detail = (w.role == Role::Receiver ? rule->receiver : rule->sender)(w);
  if (w.ctx) {
    step("finalize");
    require(w.finalize(w.ctx), "finalize");
  }
  pass("%s", detail.c_str());
}

}  // namespace netcheck
