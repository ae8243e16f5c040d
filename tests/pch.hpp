// Precompiled header of ms_tests: the two heavy includes every test file uses.
#pragma once
#include <catch2/catch.hpp>
#include <ms/ms.hpp>
