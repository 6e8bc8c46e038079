#include <doctest/doctest.h>

#include "harness.h"
#include "test_env.h"

int main(int argc, char** argv) {
  testenv::setDefaults();
  int child = harness::maybeRunChild(argc, argv);
  if (child >= 0) return child;
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
