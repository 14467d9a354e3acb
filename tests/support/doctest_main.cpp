// The one doctest main shared by every test executable (tests/test_*.cpp link against it).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
