// The smallest LOOPerSet program the reader accepts, as JSON text, shared by the suites that build
// records by hand (reader, inspect, schedule lines).
#pragma once
#include <string>

namespace lcm::test {

/// The program_annotation object of a program with two nested loops (i0 in [0, 10) around i1 in
/// [0, 20)) and one computation comp00 (float32, comp00[i0, i1] -> buf00[i0, i1], one read
/// access of buffer 0, expression access + value); memory_size `memory` (a JSON number's text).
inline std::string tiny_annotation(const std::string& memory = "0.5") {
  return R"({"memory_size":)" + memory +
         R"(,"iterators":{"i0":{"lower_bound":0,"upper_bound":10,"parent_iterator":null,)"
         R"("child_iterators":["i1"],"computations_list":[]},"i1":{"lower_bound":0,)"
         R"("upper_bound":20,"parent_iterator":"i0","child_iterators":[],)"
         R"("computations_list":["comp00"]}},"computations":{"comp00":{"absolute_order":1,)"
         R"("iterators":["i0","i1"],"comp_is_reduction":false,"write_access_relation":)"
         R"("{ comp00[i0, i1] -> buf00[i0, i1] }","write_buffer_id":1,"data_type":"float32",)"
         R"("data_type_size":4,"accesses":[{"access_is_reduction":false,"buffer_id":0,)"
         R"("access_matrix":[[1,0,0],[0,1,0]]}],"expression_representation":{"expr_type":"add",)"
         R"("children":[{"expr_type":"access","children":[]},{"expr_type":"value",)"
         R"("children":[]}]}}}})";
}

}  // namespace lcm::test
