// doctest's implementation, compiled once for every doctest binary (it is most of each one's build time).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
