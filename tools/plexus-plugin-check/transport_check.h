// plexus-plugin-check's rules for transport plugins (transport_check.cc).
#pragma once

#include <functional>
#include <string>

// Whether spec (a path, or a name such as p2p-nvlink for libplexus-p2p-nvlink.so in the plugin folders) is a file
// that exports plexusTransportPlugin_v1.
bool isTransportPlugin(const std::string& spec);

// Runs the transport rules (load, canConnect, steps, close, finalize) on spec, reporting each through report(pass,
// rule, what); returns 1 when the plugin could not be loaded or initialized at all.
int checkTransport(const std::string& spec,
                   const std::function<void(bool, const std::string&, const std::string&)>& report);
