// Tests of the input scaling (model/input_scaling): the docs/model-spec.md §3.10 sign·log10
// transform, per-column statistics fitted by hand on a two-program split, application to a batch,
// JSON round trip and clear errors.
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/dataset.hpp"
#include "data/features.hpp"
#include "model/input_scaling.hpp"

using namespace lcm;

namespace {

/// A program with 1 computation, 1 loop and one schedule per entry of loop0 (loop column 0) and
/// loop3 (column 3); static computation columns 0 and 300 are c0 and c300.
data::ProgramFeatures program(float c0, float c300, const std::vector<float>& loop0,
                              const std::vector<float>& loop3) {
  data::ProgramFeatures p;
  p.name = "p";
  p.n_comps = 1;
  p.n_loops = 1;
  p.comp_static.assign(size_t(data::kCompVectorWidth), 0.f);
  p.comp_static[0] = c0;
  p.comp_static[300] = c300;
  p.expr.assign(66 * 11, 0.f);
  const size_t S = loop0.size();
  p.comp_sched.assign(S * size_t(data::kScheduleColumns), 0.f);
  p.loops.assign(S * size_t(data::kLoopVectorWidth), 0.f);
  for (size_t s = 0; s < S; ++s) {
    p.loops[s * 8 + 0] = loop0[s];
    p.loops[s * 8 + 3] = loop3[s];
    p.schedule_index.push_back(int32_t(s));
    p.speedup.push_back(1.f);
  }
  return p;
}

data::Dataset two_programs() {
  data::Dataset ds;
  ds.programs.push_back(program(4, -1000, {10, 1000}, {2, 4}));  // 2 schedules
  ds.programs.push_back(program(0, 0, {100000}, {6}));           // 1 schedule
  return ds;
}

}  // namespace

TEST_CASE("signed_log10 (model-spec §3.10)") {
  CHECK(model::signed_log10(9.0) == 9.0);
  CHECK(model::signed_log10(10.0) == doctest::Approx(1.0));
  CHECK(model::signed_log10(-1000.0) == doctest::Approx(-3.0));
  CHECK(model::signed_log10(0.0) == 0.0);
  CHECK(model::signed_log10(-9.5) == -9.5);
}

TEST_CASE("standardize: per-column statistics over every (schedule, computation) row, by hand") {
  const data::Dataset ds = two_programs();
  // comp column 0: rows 4, 4, 0 → mean 8/3, var 32/3 − 64/9 = 32/9 → std √32 / 3
  // comp column 300: −1000, −1000, 0 → mean −2000/3, std 1000·√2 / 3
  // comp column 5: 0 everywhere → std < 1e-6 → 1 (centred only)
  // loop column 0: 10, 1000, 100000; loop column 3: 2, 4, 6 → mean 4, std √(8/3)
  model::InputScaling s = model::fit_input_scaling("standardize", ds);
  REQUIRE(s.comp_mean.size() == 910);
  REQUIRE(s.loop_mean.size() == 8);
  CHECK(s.comp_mean[0] == doctest::Approx(8.0 / 3.0));
  CHECK(s.comp_std[0] == doctest::Approx(std::sqrt(32.0) / 3.0));
  CHECK(s.comp_mean[300] == doctest::Approx(-2000.0 / 3.0));
  CHECK(s.comp_std[300] == doctest::Approx(1000.0 * std::sqrt(2.0) / 3.0));
  CHECK(s.comp_mean[5] == 0.0);
  CHECK(s.comp_std[5] == 1.0);
  CHECK(s.loop_mean[3] == doctest::Approx(4.0));
  CHECK(s.loop_std[3] == doctest::Approx(std::sqrt(8.0 / 3.0)));
  CHECK(s.loop_mean[0] == doctest::Approx(101010.0 / 3.0));

  // log_standardize: the log first. comp 300: −3, −3, 0 → mean −2, std √2;
  // loop 0: 1, 3, 5 → mean 3, std √(8/3); loop 3 stays 2, 4, 6 (< 10)
  model::InputScaling l = model::fit_input_scaling("log_standardize", ds);
  CHECK(l.comp_mean[300] == doctest::Approx(-2.0));
  CHECK(l.comp_std[300] == doctest::Approx(std::sqrt(2.0)));
  CHECK(l.loop_mean[0] == doctest::Approx(3.0));
  CHECK(l.loop_std[0] == doctest::Approx(std::sqrt(8.0 / 3.0)));
  CHECK(l.loop_mean[3] == doctest::Approx(4.0));

  // the fit only sees the split it is given: another split gives other statistics
  data::Dataset other;
  other.programs.push_back(program(7, 7, {1}, {1}));
  CHECK(model::fit_input_scaling("standardize", other).comp_mean[0] == doctest::Approx(7.0));

  // log and none need no statistics
  CHECK(model::fit_input_scaling("log", ds).comp_mean.empty());
  CHECK(model::fit_input_scaling("none", ds).comp_mean.empty());
}

TEST_CASE("apply: batch tensors are scaled column by column") {
  const data::Dataset ds = two_programs();
  data::BatchTensors bt;
  bt.batch = 1, bt.n_comps = 1, bt.n_loops = 1;
  bt.comp.assign(910, 0.f);
  bt.comp[0] = 4, bt.comp[300] = -1000, bt.comp[5] = 3;
  bt.loops.assign(8, 0.f);
  bt.loops[0] = 1000, bt.loops[3] = 6;
  bt.expr.assign(66 * 11, 0.5f);

  data::BatchTensors a = bt;
  model::fit_input_scaling("log", ds).apply(a);
  CHECK(a.comp[0] == 4.f);  // < 10: unchanged
  CHECK(a.comp[300] == doctest::Approx(-3.0));
  CHECK(a.loops[0] == doctest::Approx(3.0));
  CHECK(a.expr == bt.expr);  // expression one-hots untouched

  data::BatchTensors b = bt;
  model::fit_input_scaling("log_standardize", ds).apply(b);
  CHECK(b.comp[300] == doctest::Approx((-3.0 + 2.0) / std::sqrt(2.0)));
  CHECK(b.comp[5] == doctest::Approx(3.0));   // constant column: centred at 0, std 1
  CHECK(b.loops[0] == doctest::Approx(0.0));  // log 1000 = 3 = the mean
  CHECK(b.loops[3] == doctest::Approx(2.0 / std::sqrt(8.0 / 3.0)));

  data::BatchTensors n = bt;
  model::InputScaling none;
  none.apply(n);
  CHECK(n.comp == bt.comp);
}

TEST_CASE("JSON round trip is exact; bad metadata is a clear error") {
  model::InputScaling s = model::fit_input_scaling("log_standardize", two_programs());
  model::InputScaling r = model::InputScaling::from_json(s.to_json());
  CHECK(r.mode == "log_standardize");
  CHECK(r.comp_mean == s.comp_mean);
  CHECK(r.comp_std == s.comp_std);
  CHECK(r.loop_mean == s.loop_mean);
  CHECK(r.loop_std == s.loop_std);
  CHECK(model::InputScaling::from_json(model::InputScaling{}.to_json()).mode == "none");
  CHECK_THROWS_AS(model::InputScaling::from_json("{\"mode\":\"cubic\"}"), std::runtime_error);
  CHECK_THROWS_AS(model::InputScaling::from_json("{\"mode\":\"standardize\"}"), std::runtime_error);
  CHECK_THROWS_AS(model::InputScaling::from_json("{\"mode\":\"standardize\",\"comp_mean\":[1,2]}"),
                  std::runtime_error);
  CHECK_THROWS_AS(model::InputScaling::from_json("not json"), std::runtime_error);
  CHECK_THROWS_AS(model::fit_input_scaling("cubic", two_programs()), std::invalid_argument);
  CHECK_THROWS_AS(model::fit_input_scaling("standardize", data::Dataset{}), std::invalid_argument);
  model::InputScaling unfitted;
  unfitted.mode = "standardize";
  data::BatchTensors bt;
  bt.comp.assign(910, 0.f);
  bt.loops.assign(8, 0.f);
  CHECK_THROWS_AS(unfitted.apply(bt), std::invalid_argument);
}

TEST_CASE("input-scaling metadata nested 200,000 deep is one clear error, not a stack overflow") {
  const std::string open = R"({"mode":"log","comp_mean":)" + std::string(200000, '[');
  for (const std::string& text : {open, open + std::string(200000, ']') + "}"}) {
    std::string e;
    try {
      model::InputScaling::from_json(text);
    } catch (const std::runtime_error& x) {
      e = x.what();
    }
    CHECK(e ==
          "lcm.input_scaling metadata is not a JSON object (bad JSON nested deeper than 64 levels "
          "(at offset 89))");
  }
}

TEST_CASE(
    "comp_scaled_columns: the columns a pre-trained encoder reads stay raw; JSON round trip") {
  const data::Dataset ds = two_programs();
  const model::InputScaling all = model::fit_input_scaling("log_standardize", ds);
  const model::InputScaling part = model::fit_input_scaling("log_standardize", ds, 207);
  CHECK(all.comp_scaled_columns == 910);
  CHECK(part.comp_scaled_columns == 207);
  CHECK(part.comp_mean[0] == all.comp_mean[0]);  // column 0 < 207: fitted as before
  CHECK(part.comp_mean[300] == 0.0);             // column 300: raw
  CHECK(part.comp_std[300] == 1.0);
  CHECK(all.comp_mean[300] != 0.0);
  data::BatchTensors bt = data::program_batch(ds.programs[0], 0, 2);
  const std::vector<float> raw = bt.comp;
  part.apply(bt);
  CHECK(bt.comp[300] == raw[300]);
  CHECK(bt.comp[0] == part.apply_comp(raw[0], 0));
  CHECK(bt.comp[0] != raw[0]);
  const model::InputScaling back = model::InputScaling::from_json(part.to_json());
  CHECK(back.comp_scaled_columns == 207);
  CHECK(model::InputScaling::from_json(all.to_json()).comp_scaled_columns == 910);
  CHECK(all.to_json().find("comp_scaled_columns") == std::string::npos);  // unchanged format
  const model::InputScaling none = model::fit_input_scaling("log", ds, 0);
  data::BatchTensors b2 = data::program_batch(ds.programs[0], 0, 2);
  const std::vector<float> before = b2.comp;
  none.apply(b2);
  CHECK(b2.comp == before);     // comp_vector encoder: every computation column raw
  CHECK(b2.loops[0] != 10.0f);  // loop vectors still scaled (log10(10) = 1)
  CHECK_THROWS_AS(model::fit_input_scaling("log", ds, 911), std::invalid_argument);
  std::string bad = part.to_json();
  bad.replace(bad.find("\"comp_scaled_columns\":207"), 26, "\"comp_scaled_columns\":-3");
  CHECK_THROWS_AS(model::InputScaling::from_json(bad), std::runtime_error);
}

TEST_CASE(
    "a standard deviation of 0 (or below the fit's floor) is described as the data's column") {
  // Every 37th computation column and every loop column, each bad value: from_json refuses it
  // naming the column and the training data it describes; the message never blames the weights.
  model::InputScaling fitted = model::fit_input_scaling("standardize", two_programs());
  int cases = 0;
  for (const bool comp : {true, false}) {
    const int width = comp ? data::kCompVectorWidth : data::kLoopVectorWidth;
    for (int j = 0; j < width; j += comp ? 37 : 1)
      for (const double bad : {0.0, -1.0, 1e-9, -0.0}) {
        model::InputScaling s = fitted;
        (comp ? s.comp_std : s.loop_std)[size_t(j)] = bad;
        const std::string col = std::string(comp ? "comp[" : "loop[") + std::to_string(j) + "]";
        std::string m;
        try {
          model::InputScaling::from_json(s.to_json());
        } catch (const std::runtime_error& e) {
          m = e.what();
        }
        INFO(col << " std " << bad << ": " << m);
        CHECK(m.find("input column " + col) != std::string::npos);
        CHECK(m.find("standard deviation") != std::string::npos);
        CHECK(m.find("training data") != std::string::npos);
        CHECK(m.find("weights") == std::string::npos);
        ++cases;
      }
  }
  CHECK(cases == 4 * (25 + 8));
  // a column holding a value that is not finite in the training data: named with the program
  data::Dataset ds = two_programs();
  ds.programs[1].name = "p_nan";
  ds.programs[1].comp_static[300] = std::nanf("");
  std::string m;
  try {
    model::fit_input_scaling("standardize", ds);
  } catch (const std::invalid_argument& e) {
    m = e.what();
  }
  CHECK(m.find("input column comp[300]") != std::string::npos);
  CHECK(m.find("program p_nan, schedule 0") != std::string::npos);
  CHECK(m.find("training data") != std::string::npos);
  // a column that is constant in the data is fine: std 1, so every value scales
  model::InputScaling ok = model::fit_input_scaling("standardize", two_programs());
  CHECK(ok.comp_std[5] == 1.0);
  CHECK_NOTHROW(model::InputScaling::from_json(ok.to_json()));
}
