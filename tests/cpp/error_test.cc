// Require's two forms: the eager one, and the lazy one whose parameter,
// value or rule is a function called only when the check fails.
#include "posenc/error.h"

#include <gtest/gtest.h>

#include <string>

namespace posenc {
namespace {

std::string MessageOf(const auto& check) {
  try {
    check();
  } catch (const Error& e) {
    return e.what();
  }
  return "(nothing thrown)";
}

TEST(Require, TheLazyFormThrowsTheEagerFormsMessage) {
  const int n = 7;
  const std::string eager =
      MessageOf([&] { Require(false, "op", "x[" + std::to_string(n) + "]", n, "must be < " + std::to_string(n)); });
  const std::string lazy = MessageOf([&] {
    Require(
        false, "op", [&] { return "x[" + std::to_string(n) + "]"; }, n,
        [&] { return "must be < " + std::to_string(n); });
  });
  EXPECT_EQ(eager, "[op] x[7] = 7: must be < 7");
  EXPECT_EQ(lazy, eager);
  // Any one part lazy; a value built lazily prints as the eager one would
  // (a Verbatim as is, a string quoted).
  EXPECT_EQ(MessageOf([] {
              Require(
                  false, "op", "shape", [] { return Verbatim{"[2, 3]"}; }, "must match");
            }),
            "[op] shape = [2, 3]: must match");
  EXPECT_EQ(MessageOf([] {
              Require(
                  false, "op", "name", [] { return std::string("a b"); }, "must be known");
            }),
            MessageOf([] { Require(false, "op", "name", std::string("a b"), "must be known"); }));
}

TEST(Require, TheLazyFormBuildsNothingWhenTheCheckPasses) {
  int built = 0;
  const auto part = [&] {
    ++built;
    return std::string("built");
  };
  Require(true, "op", part, 1, part);
  Require(true, "op", "p", part, "rule");
  EXPECT_EQ(built, 0);
  EXPECT_NE(MessageOf([&] { Require(false, "op", part, 1, part); }), "(nothing thrown)");
  EXPECT_EQ(built, 2);
}

}  // namespace
}  // namespace posenc
