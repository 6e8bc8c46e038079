// The orchestrator's half of a job: start the workers, read their reports within the bound, kill what is left,
// and make one outcome of their verdicts, exit statuses and last steps. No plugin code runs in this process.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "netcheck.h"

namespace netcheck {
namespace {

struct Proc {
  const char* name;  // "receiver" or "sender": its role, and how its reports are prefixed
  pid_t pid = -1;
  int fd = -1;          // its report socket, until end of file
  std::string pending;  // a line not yet complete
  std::string verdict;  // PASS, FAIL, SKIP, LOST, or empty: none yet
  std::string text;
  std::string lastStep = "starting";
  Clock::time_point verdictAt;  // when the verdict came: of two failures, the first is the cause
  int status = 0;
  bool killed = false;  // by us, at the bound
};

void spawn(Proc& p, const Rule& rule, int linkFd, uint64_t commId, const std::vector<std::string>& args) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
    throw std::runtime_error(std::string("socketpair: ") + strerror(errno));
  char id[32];
  snprintf(id, sizeof id, "%llx", (unsigned long long)commId);
  std::vector<std::string> strings = {"plexus-net-check",    "--worker", rule.name, p.name, std::to_string(linkFd),
                                      std::to_string(sv[1]), id};
  strings.insert(strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // a worker never outlives the orchestrator
    if (getppid() != parent) _exit(1);
    dup2(STDERR_FILENO, STDOUT_FILENO);          // stdout carries this tool's lines alone, whatever the plugin prints
    if (linkFd >= 0) fcntl(linkFd, F_SETFD, 0);  // the two fds it keeps across exec
    fcntl(sv[1], F_SETFD, 0);
    execv("/proc/self/exe", argv.data());
    dprintf(sv[1], "FAIL cannot run /proc/self/exe as a worker: %s\n", strerror(errno));
    _exit(127);
  }
  close(sv[1]);
  if (pid < 0) {
    close(sv[0]);
    throw std::runtime_error(std::string("fork: ") + strerror(errno));
  }
  p.pid = pid;
  p.fd = sv[0];
}

void handleLine(Proc& p, const std::string& line,
                const std::function<void(const std::string&, const std::string&)>& onLine) {
  size_t space = line.find(' ');
  std::string kind = line.substr(0, space), text = space == std::string::npos ? "" : line.substr(space + 1);
  if (kind == "STEP")
    p.lastStep = text;
  else if (kind == "NOTE" || kind == "ROW")
    onLine(kind, text);
  else if (p.verdict.empty() && (kind == "PASS" || kind == "FAIL" || kind == "SKIP" || kind == "LOST"))
    p.verdict = kind, p.text = text, p.verdictAt = Clock::now();
}

// Reads one report socket: false at end of file.
bool readReports(Proc& p, const std::function<void(const std::string&, const std::string&)>& onLine) {
  char buf[4096];
  ssize_t n = read(p.fd, buf, sizeof buf);
  if (n < 0 && errno == EINTR) return true;
  if (n <= 0) return false;
  p.pending.append(buf, (size_t)n);
  for (size_t nl; (nl = p.pending.find('\n')) != std::string::npos;) {
    handleLine(p, p.pending.substr(0, nl), onLine);
    p.pending.erase(0, nl + 1);
  }
  return true;
}

void reap(Proc& p) {
  // After end of file the worker is exiting; give it a moment, then make sure.
  for (int i = 0; i < 200; i++) {
    if (waitpid(p.pid, &p.status, WNOHANG) == p.pid) return;
    usleep(10000);
  }
  kill(p.pid, SIGKILL);
  p.killed = true;
  waitpid(p.pid, &p.status, 0);
}

std::string signalText(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? "SIG" + std::string(abbrev) + " (" + strsignal(sig) + ")" : "signal " + std::to_string(sig);
}

Outcome combine(const std::vector<Proc>& procs, double bound) {
  const bool pair = procs.size() > 1;
  auto who = [&](const Proc& p) { return pair ? std::string(p.name) + ": " : std::string(); };
  std::vector<std::string> reasons;
  auto failure = [&]() {
    std::string s;
    for (auto& r : reasons) s += (s.empty() ? "" : "; ") + r;
    return Outcome{Verdict::Fail, s};
  };
  // The causes first: a crash, a failed check, a hang; a worker that only lost its peer reports an effect.
  for (const Proc& p : procs)
    if (!p.killed && WIFSIGNALED(p.status))
      reasons.push_back(who(p) + "crashed with " + signalText(WTERMSIG(p.status)) + " at step '" + p.lastStep + "'" +
                        (p.verdict == "FAIL" ? " after reporting: " + p.text : ""));
  if (!reasons.empty()) return failure();
  std::vector<const Proc*> failed;
  for (const Proc& p : procs)
    if (p.verdict == "FAIL") failed.push_back(&p);
  std::sort(failed.begin(), failed.end(), [](const Proc* a, const Proc* b) { return a->verdictAt < b->verdictAt; });
  for (const Proc* p : failed) reasons.push_back(who(*p) + p->text);
  if (!reasons.empty()) return failure();
  for (const Proc& p : procs) {
    char text[512];
    if (p.killed && p.verdict.empty())
      snprintf(text, sizeof text, "no verdict within %.1f s; killed at step '%s'", bound, p.lastStep.c_str());
    else if (p.killed)
      snprintf(text, sizeof text, "reported %s but did not exit; killed at step '%s'", p.verdict.c_str(),
               p.lastStep.c_str());
    else if (p.verdict.empty())
      snprintf(text, sizeof text, "ended with exit status %d and no verdict, at step '%s'", WEXITSTATUS(p.status),
               p.lastStep.c_str());
    else
      continue;
    reasons.push_back(who(p) + text);
  }
  if (!reasons.empty()) return failure();
  for (const Proc& p : procs)
    if (p.verdict == "LOST") reasons.push_back(who(p) + p.text);
  if (!reasons.empty()) return failure();
  for (const Proc& p : procs)
    if (p.verdict == "SKIP") return {Verdict::Skip, p.text};
  std::string text;
  for (const Proc& p : procs)
    if (!p.text.empty()) text += (text.empty() ? "" : "; ") + p.text;
  return {Verdict::Pass, text};
}

}  // namespace

Outcome runJob(const Rule& rule, const std::vector<std::string>& args, uint64_t commId, double bound,
               const std::function<void(const std::string&, const std::string&)>& onLine) {
  std::vector<Proc> procs(rule.sender ? 2 : 1);
  procs[0].name = "receiver";
  if (rule.sender) procs[1].name = "sender";
  int link[2] = {-1, -1};
  try {
    if (rule.sender && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, link))
      throw std::runtime_error(std::string("socketpair: ") + strerror(errno));
    for (size_t i = 0; i < procs.size(); i++) spawn(procs[i], rule, link[i], commId, args);
  } catch (const std::exception& e) {
    for (Proc& p : procs)
      if (p.pid > 0) kill(p.pid, SIGKILL), waitpid(p.pid, nullptr, 0), close(p.fd);
    for (int fd : link)
      if (fd >= 0) close(fd);
    return {Verdict::Fail, std::string("cannot start the workers: ") + e.what()};
  }
  for (int fd : link)
    if (fd >= 0) close(fd);  // the workers hold their ends: one's exit is the other's end of file

  const auto start = Clock::now();
  auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(bound));
  bool shortened = false;
  for (;;) {
    std::vector<pollfd> fds;
    for (Proc& p : procs)
      if (p.fd >= 0) fds.push_back({p.fd, POLLIN, 0});
    if (fds.empty()) break;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      for (Proc& p : procs)
        if (p.fd >= 0) kill(p.pid, SIGKILL), p.killed = true;
      break;
    }
    if (poll(fds.data(), fds.size(), (int)std::min<long long>(left, 1000)) < 0 && errno != EINTR) break;
    for (Proc& p : procs)
      for (const pollfd& f : fds)
        if (f.fd == p.fd && (f.revents & (POLLIN | POLLHUP | POLLERR)) && !readReports(p, onLine))
          close(p.fd), p.fd = -1;
    // Once one side has failed, the other has a second to say why in its own words, then goes.
    bool anyFailed = std::any_of(procs.begin(), procs.end(), [](const Proc& p) { return p.verdict == "FAIL"; });
    if (anyFailed && !shortened) {
      deadline = std::min(deadline, Clock::now() + std::chrono::seconds(1));
      shortened = true;
    }
  }
  for (Proc& p : procs) {
    if (p.fd >= 0) close(p.fd), p.fd = -1;
    reap(p);
  }
  return combine(procs, bound);
}

}  // namespace netcheck
