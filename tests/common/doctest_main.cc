// The main of a doctest binary that needs nothing before its cases run. A binary that defines its own main
// (the unit and multirank suites) does not pull this member out of the plexus-doctest archive.
#include <doctest/doctest.h>

int main(int argc, char** argv) { return doctest::Context(argc, argv).run(); }
