// Checks on safetensors files for the tests (engine/safetensors.hpp).
#pragma once
#include <doctest/doctest.h>

#include <cstddef>

#include "engine/safetensors.hpp"

namespace lcm::test {

/// Checks that `got` holds the tensors of `want` in the same order: the same names, dtypes,
/// shapes and bytes (the metadata is not compared).
inline void expect_same_tensors(const SafeTensorsFile& got, const SafeTensorsFile& want) {
  REQUIRE(got.tensors.size() == want.tensors.size());
  for (size_t i = 0; i < want.tensors.size(); ++i) {
    CAPTURE(want.tensors[i].first);
    CHECK(got.tensors[i].first == want.tensors[i].first);
    CHECK(got.tensors[i].second.dtype == want.tensors[i].second.dtype);
    CHECK(got.tensors[i].second.shape == want.tensors[i].second.shape);
    CHECK(got.tensors[i].second.bytes == want.tensors[i].second.bytes);
  }
}

}  // namespace lcm::test
