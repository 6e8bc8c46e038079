// plexus-net-check: what the orchestrator (main.cc, orchestrator.cc) and the worker processes (worker.cc,
// rules.cc, table.cc) share.
//
// Each rule is one job of fresh worker processes: this binary re-executed (/proc/self/exe) once for a
// rule of one process, twice for a rule of two, where the receiver listens, accepts and receives and the
// sender connects and sends. The two workers share a socketpair (the Link) for what NCCL carries out of
// band: listen handles and "go" signals, never the plugin's network. Each worker reports to the
// orchestrator on a socket of its own: the steps it reaches, then one verdict. A failing check ends its
// worker at once (verdict first, no cleanup: a plugin that just broke its contract may hang in close),
// and a worker that crashes or hangs costs its rule alone.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "plugin/net.h"

namespace netcheck {

using Clock = std::chrono::steady_clock;
double secondsSince(Clock::time_point t);

// ---- options (options.cc) ----

struct Options {
  std::string plugin;  // a path, a name (tried as given, then libnccl-net-<name>.so) or "socket"
  int device = 0;
  size_t minBytes = 8, maxBytes = 64 << 20;  // the table's sizes
  int stepFactor = 4;
  int iters = 20, warmup = 5;
  double timeout = 5;  // seconds: the bound of each rule (of each size and phase in the table)
  std::string rule;    // run this rule alone; empty: every rule, then the table
  bool table = true;
  bool list = false;
  bool skipWithoutDevice = false;  // a plugin with no device here is SKIPPED (exit 77), not failed
};
// Parses argv[first..argc). A bad argument prints what is wrong and the usage line to stderr, and exits 2.
Options parseOptions(int argc, char** argv, int first);
[[noreturn]] void usage(int code);
std::string bytesText(size_t bytes);  // "64 MiB", "1000 B"

// ---- rules (rules.cc, table.cc) ----

struct Worker;
enum class Role { Receiver, Sender };

struct Rule {
  const char* name;
  const char* checks;  // what it checks, one line (--list)
  // Each returns what was checked, for the PASS line; a failed check does not return (fail()).
  std::string (*receiver)(Worker&);  // runs alone when sender is null
  std::string (*sender)(Worker&);
};
const std::vector<Rule>& rules();  // in the order they run; the last is "table"
const Rule* findRule(const std::string& name);
std::vector<size_t> tableSizes(const Options& o);  // table.cc: the table's rows
std::string tableReceiver(Worker& w);              // table.cc: echoes pings, receives the bandwidth streams
std::string tableSender(Worker& w);                // table.cc: times them and reports the rows

// ---- orchestrator side (orchestrator.cc) ----

enum class Verdict { Pass, Fail, Skip };
struct Outcome {
  Verdict verdict;
  std::string text;
};
// Runs `rule` in fresh workers (one, or a receiver and a sender joined by a link), each /proc/self/exe run with
// `args` (the user's options); kills what is left after `bound` seconds. Their NOTE and ROW lines go to onLine
// as they come; the verdicts, exit statuses and last steps of both make the outcome.
Outcome runJob(const Rule& rule, const std::vector<std::string>& args, uint64_t commId, double bound,
               const std::function<void(const std::string& kind, const std::string& text)>& onLine);

// ---- worker side (worker.cc) ----

// Entry point of a re-executed worker: argv = exe --worker <rule> <role> <linkFd> <reportFd> <commId> <options>.
[[noreturn]] void workerMain(int argc, char** argv);

// Reports to the orchestrator, one line each. A verdict ends the process (_exit) without cleanup.
void step(const char* fmt, ...) __attribute__((format(printf, 1, 2)));  // where we are, for a hang report
void note(const char* fmt, ...) __attribute__((format(printf, 1, 2)));  // printed as a "# " line
void row(const char* fmt, ...) __attribute__((format(printf, 1, 2)));   // a line of the table, printed as is
[[noreturn]] void pass(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] void skip(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// The peer worker is gone: a consequence of its own verdict or crash, which the orchestrator reports.
[[noreturn]] void lost(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
const char* resultName(ncclResult_t r);  // "ncclSystemError (2)"
// Fails unless r is ncclSuccess: "<what> returned <r>; expected ncclSuccess".
void require(ncclResult_t r, const char* what);

// The out-of-band channel to the peer worker (a socketpair). Waits are bounded by the worker's deadline;
// the peer's end closing is reported with lost().
class Link {
 public:
  Link(int fd, const Clock::time_point* deadline) : fd_(fd), deadline_(deadline) {}
  void put(const void* data, size_t n);
  void get(void* data, size_t n, const char* what);
  void signal(char code) { put(&code, 1); }
  void expect(char code, const char* what);
  // Waits until the peer's end closes (it exited): true, or false at `until`.
  bool waitClosed(Clock::time_point until);
  // Whether a signal from the peer is waiting (it does not take it).
  bool ready() const;

 private:
  int fd_;
  const Clock::time_point* deadline_;
};

struct Counters {
  long isendCalls = 0, isendNull = 0, irecvCalls = 0, irecvNull = 0, testCalls = 0;
};

struct Worker {
  Options opt;
  Role role = Role::Receiver;
  uint64_t commId = 0;
  const plexus::NetPlugin* plugin = nullptr;
  plexus::NetApi* net = nullptr;
  void* ctx = nullptr;
  int ndev = 0;
  ncclNetProperties_v12_t props{};  // of opt.device
  std::string envChanged;           // variables the plugin's init set, changed or removed
  Clock::time_point deadline;
  Link link{-1, &deadline};
  Counters count;

  // A new bound of opt.timeout from now (each rule once; the table per size and phase), and the
  // watchdog that reports a plugin call that never returns, set to match.
  void restartClock();
  bool expired() const { return Clock::now() >= deadline; }
  int maxRecvs() const { return props.maxRecvs < 1 ? 1 : props.maxRecvs; }

  // The plugin's calls, each watched: one that does not return by the deadline is reported by name.
  ncclResult_t init(void** context, uint64_t id);
  ncclResult_t finalize(void* context);
  ncclResult_t devices(int* n);
  ncclResult_t getProperties(int dev, ncclNetProperties_v12_t* p);
  ncclResult_t listen(void* handle, void** listenComm);
  ncclResult_t connect(void* handle, void** sendComm);
  ncclResult_t accept(void* listenComm, void** recvComm);
  ncclResult_t regMr(void* comm, void* data, size_t size, void** mhandle);
  ncclResult_t deregMr(void* comm, void* mhandle);
  ncclResult_t isend(void* comm, void* data, size_t size, int tag, void* mhandle, void** request);
  ncclResult_t irecv(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request);
  ncclResult_t iflush(void* comm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t test(void* request, int* done, int* sizes);
  ncclResult_t closeSend(void* comm);
  ncclResult_t closeRecv(void* comm);
  ncclResult_t closeListen(void* comm);
};

// Page-aligned host memory, touched once so that no first-use page fault lands in a measurement.
class HostMemory {
 public:
  explicit HostMemory(size_t bytes);
  ~HostMemory();
  HostMemory(const HostMemory&) = delete;
  HostMemory& operator=(const HostMemory&) = delete;
  char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  char* data_ = nullptr;
  size_t size_ = 0;
};

// regMr of host memory (NCCL_PTR_HOST) on one comm; deregMr, checked, by release() or when it goes.
class Registration {
 public:
  Registration(Worker& w, void* comm, void* data, size_t size);
  ~Registration() { release(); }
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;
  void* handle() const { return mhandle_; }
  void release();       // deregMr, which must succeed
  ncclResult_t drop();  // deregMr, whatever it returns (after the peer died)

 private:
  Worker& w_;
  void* comm_;
  void* mhandle_ = nullptr;
  bool registered_ = false;
};

// This worker's end of one connection: its listenComm and recvComm, or its sendComm. What is still
// open when it goes is closed, checked, recvComm/sendComm before listenComm.
class Connection {
 public:
  explicit Connection(Worker& w) : w_(w) {}
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void listen();                   // listenComm, and the handle to pass to the peer
  bool acceptOnce();               // one accept call: true once recvComm is there
  bool connectOnce(void* handle);  // one connect call on the peer's handle (kept: plugins keep state in it)
  void closeSend();
  void closeRecv();
  void closeListen();

  void* listenComm = nullptr;
  void* sendComm = nullptr;
  void* recvComm = nullptr;
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  int acceptCalls = 0, connectCalls = 0;
  double slowestCall = 0;  // seconds, of any connect or accept call

 private:
  Worker& w_;
};

// The usual setup, by role: the receiver listens, passes the handle over the link and accepts until it has
// its recvComm, then closes the listenComm (NCCL's order) unless keepListen; the sender connects until it
// has its sendComm. Returns this side's comm.
void* establish(Worker& w, Connection& c, bool keepListen = false);

// One isend / irecv call; nullptr when the plugin gave a NULL request ("retry later"). Counted.
void* trySend(Worker& w, void* comm, void* data, size_t size, int tag, void* mhandle);
void* tryRecv(Worker& w, void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles);
// The same, retried until the plugin takes it, bounded by the deadline.
void* postSend(Worker& w, void* comm, void* data, size_t size, int tag, void* mhandle, const char* what);
void* postRecv(Worker& w, void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, const char* what);
// One test call (an error fails the rule): true once done. sizes may be null.
bool testOnce(Worker& w, void* request, int* sizes, const char* what);
// test until done, bounded by the deadline; returns how many calls it took.
long waitDone(Worker& w, void* request, int* sizes, const char* what);

// NCCL's proxy loop: requests 0..count-1 posted in order with at most `window` in flight (a NULL request is
// retried after testing), the oldest tested; done(i, sizes) once request i completes. Bounded by the deadline.
void pipeline(Worker& w, int count, int window, const std::function<void*(int)>& post,
              const std::function<void(int, const int*)>& done, const char* what);

// Message contents: id's bytes differ from every other id's from the first byte on.
void fillPattern(void* data, size_t n, uint32_t id);
bool matchesPattern(const void* data, size_t n, uint32_t id);

// A stream of messages on one comm, tag `tag`, each message in its own slot of registered memory (slots
// reused every `window` messages). The receiver posts `capacity` bytes for each and checks that each receive
// reports its message's size and holds its contents; one that holds another message is named.
struct Message {
  size_t size;
  uint32_t id;
};
void sendStream(Worker& w, void* comm, const std::vector<Message>& msgs, int window, int tag);
void recvStream(Worker& w, void* comm, const std::vector<Message>& msgs, int window, int tag, size_t capacity);

}  // namespace netcheck
