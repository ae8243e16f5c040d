// The Catch2 runner for ms_tests. Test cases live in tests/<area>/*.cpp.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
