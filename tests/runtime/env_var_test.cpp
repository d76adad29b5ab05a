// env_number: checked numeric settings from the environment.
#include "runtime/env_var.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "runtime/error.h"

namespace liftoff {
namespace {

constexpr const char* kName = "LIFTOFF_TEST_ENV_NUMBER";

TEST(EnvNumber, UnsetOrEmptyIsNothing) {
  unsetenv(kName);
  EXPECT_FALSE(env_number(kName, 0.0, true, "a positive number").has_value());
  setenv(kName, "", 1);
  EXPECT_FALSE(env_number(kName, 0.0, true, "a positive number").has_value());
  unsetenv(kName);
}

TEST(EnvNumber, ValuesAndBounds) {
  setenv(kName, "2.5", 1);
  EXPECT_DOUBLE_EQ(*env_number(kName, 0.0, true, "a positive number"), 2.5);
  setenv(kName, "0", 1);
  EXPECT_DOUBLE_EQ(*env_number(kName, 0.0, false, "a number >= 0"), 0.0);       // inclusive minimum
  EXPECT_THROW(env_number(kName, 0.0, true, "a positive number"), ValueError);  // exclusive minimum
  unsetenv(kName);
}

TEST(EnvNumber, GarbageNamesTheVariableAndTheValue) {
  for (const char* bad : {"abc", "12ms", "1e999"}) {
    setenv(kName, bad, 1);
    try {
      env_number(kName, 0.0, true, "a positive number of seconds");
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(kName) + "='" + bad +
                                           "' is not a positive number of seconds"),
                std::string::npos)
          << e.what();
    }
  }
  unsetenv(kName);
}

}  // namespace
}  // namespace liftoff
