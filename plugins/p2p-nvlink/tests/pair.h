// One CUDA connection of p2p-nvlink, both sides, through the plugin's own table (dlopen): set up, connect (polled, as
// the core does), then a kernel's traffic done with the driver's copies: the sender fills the Simple and LL buffers
// through its connector and publishes tail, the receiver waits for tail through its own, checks every byte, writes
// the zero-copy record and head, and the sender sees them. Every side runs in a process forked for it (both in one
// for a same-process pair), so the caller never touches CUDA (a process must not fork after initialising it).
// Used by the tests over the stand-in driver (fake_cuda.cc) and by the GPU test over the real one.
#pragma once

#include <string>
#include <vector>

namespace p2ptest {

struct PairSpec {
  bool sameProcess = false;
  int sendDevice = 0, recvDevice = 0;
  std::vector<std::string> env, sendEnv, recvEnv;  // NAME=value: both sides, one side
  bool freeReceiverFirst = false;
  int connections = 1;  // two processes: connections set up and connected together (channels 0..n-1)

  // What the connectors must say (-1: not checked).
  int sameSpace = -1;
  int ptrExchange = -1;
  // Stand-in driver only: calls a side must have made / must not have made.
  std::vector<std::string> sendCalls, recvCalls, sendNoCalls, recvNoCalls;
  // Stand-in driver, two processes: whether the sender's Simple buffer lies in memory its own process allocated.
  int simpleInSender = -1;

  // Faults: the receiver ends right after sending its info, or never connects.
  enum Fault { None, ReceiverDies, ReceiverSilent } fault = None;
  // The pair must fail: setup or connect of a side returns an error, and one of its warnings holds every
  // '|'-separated part of failMessage.
  bool expectFailure = false;
  std::string failMessage;
  double failAfter = 0;    // the sender's connect kept answering ncclInProgress at least this long (seconds)
  double failWithin = 30;  // and failed within this
};

// "" when everything held; otherwise what did not, with each side's warnings.
std::string runPair(const char* pluginPath, const char* driverPath, const PairSpec& spec);

// Runs fn in a forked child and returns its exit status (-1 when it did not exit within seconds, and was killed).
int inChild(int (*fn)(void*), void* arg, double seconds);

}  // namespace p2ptest
