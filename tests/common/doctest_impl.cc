// doctest's implementation, compiled once for every doctest binary (it is most of each one's build time).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>

namespace {

// ctest runs each case alone, by name (PLEXUS_TEST_ONE_CASE=1, --test-case=<name>): a name that matches no case (CMake
// cuts a discovered name at each ';', a case renamed since discovery) would otherwise pass having run nothing.
struct OneCaseGuard : doctest::IReporter {
  explicit OneCaseGuard(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& stats) override {
    if (!getenv("PLEXUS_TEST_ONE_CASE") || stats.numTestCasesPassingFilters > 0) return;
    fprintf(stderr, "no test case matches the name ctest gave (a ';' in a case's name cuts it in CMake's list): "
                    "rename the case or run ctest's discovery again\n");
    fflush(stderr);
    _Exit(1);
  }
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

}  // namespace

REGISTER_LISTENER("plexus-one-case", 1, OneCaseGuard);
