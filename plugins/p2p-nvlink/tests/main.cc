#include <plexus/types.h>

// The plugin's sources compiled into this binary log through this (silent in tests).
namespace p2p {
ncclDebugLogger_t logger = nullptr;
}
