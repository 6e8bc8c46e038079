// Setting up a socket-net connection without ever blocking: the connector opens the control socket and
// the data sockets at once and sends a hello on each; the listener accepts sockets from any number of
// connectors, reads their hellos, drops those with a wrong magic or shape, and groups the rest by
// connection id until one connection has all its sockets. Both are driven by repeated connect()/accept()
// calls, each of which does what the sockets allow and returns.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transport/net/socket/comm.h"
#include "transport/net/socket/common.h"

namespace plexus::socketnet {

class Listener {
 public:
  // Listens on `addr` (port 0: any) of device `devName`, and fills *handle for the connector.
  static ncclResult_t create(const SocketAddress& addr, const std::string& devName, Handle* handle,
                             std::unique_ptr<Listener>* out);
  // *out stays empty until a connection has all its sockets.
  ncclResult_t accept(std::unique_ptr<RecvComm>* out);

 private:
  struct Incoming {  // an accepted socket whose hello is not in yet
    UniqueFd fd;
    SocketAddress peer;
    Hello hello;
    size_t got;
    Clock::time_point since;
  };
  struct Group {  // sockets of one connection, by hello index
    uint64_t connId;
    std::vector<UniqueFd> sockets;
    int count;
    SocketAddress peer;  // the control socket's, once in
    Clock::time_point since;
  };
  void drop(const Incoming& in, const char* why);
  void file(Incoming&& in);

  UniqueFd fd_;
  Handle handle_{};
  Knobs knobs_{};
  std::string where_;  // "127.0.0.1:40000 (lo)"
  std::vector<Incoming> incoming_;
  std::vector<Group> groups_;
};

class Connector {
 public:
  Connector(const Handle& handle, int trafficClass);
  // *out stays empty until every socket is connected and has sent its hello.
  ncclResult_t progress(std::unique_ptr<SendComm>* out);

 private:
  struct Attempt {
    enum class State { Idle, Connecting, Hello, Ready } state = State::Idle;
    UniqueFd fd;
    Hello hello;
    size_t sent = 0;
    int retries = 0;
    Clock::time_point notBefore, started;
  };
  ncclResult_t retryOrFail(Attempt& a, int err);
  ncclResult_t fail(ncclResult_t result, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

  Handle handle_;
  int trafficClass_;
  Knobs knobs_;
  std::string peer_;
  std::vector<Attempt> attempts_;  // [0] the control socket, then the data sockets
  Clock::time_point start_;
  double timeoutSec_;
};

// Checks that `handle` is one a Socket-net listen() produced; a clear error otherwise.
ncclResult_t checkHandle(const Handle& handle);

}  // namespace plexus::socketnet
