#include <doctest/doctest.h>

#include "test_env.h"

int main(int argc, char** argv) {
  testenv::setDefaults();
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
