// Tests of lcm-eval --compare (train/compare_reports.hpp): reports written by write_eval_report are
// read back, each metric's mean ± sd over a setting's reports and the paired per-program
// differences are computed here independently and found in the table, and bad reports and
// arguments fail with clear messages (library and command line).
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "support/test_support.hpp"
#include "train/compare_reports.hpp"
#include "train/eval_output.hpp"
#include "util/atomic_file.hpp"

using namespace lcm;

namespace {

/// A report of three programs whose metrics are `base` + the program's offset.
std::string write_report(const std::string& dir, const std::string& name, double base,
                         bool third_spearman_nan = false) {
  model::MetricsSummary m;
  const double off[3] = {0.0, 0.1, 0.2};
  for (int p = 0; p < 3; ++p) {
    model::ProgramMetrics pm;
    pm.program = "function" + std::to_string(p);
    pm.n_schedules = 10;
    pm.mape = 100 * (base + off[p]);
    pm.spearman = p == 2 && third_spearman_nan ? std::nan("") : base + off[p];
    pm.ndcg = pm.ndcg_5 = pm.ndcg_1 = base + off[p];
    pm.top1_recovered = pm.top5_recovered = base + off[p];
    m.programs.push_back(pm);
  }
  m.n_datapoints = 30;
  m.mean_mape = 100 * (base + 0.1);
  m.mean_spearman = third_spearman_nan ? base + 0.05 : base + 0.1;
  m.mean_ndcg = m.mean_ndcg_5 = m.mean_ndcg_1 = base + 0.1;
  m.mean_top1_recovered = m.mean_top5_recovered = base + 0.1;
  m.weighted_mape = 100 * base;
  train::RunPaths paths;
  paths.eval_json = dir + "/eval_" + name + ".json";
  paths.eval_csv = dir + "/eval_" + name + ".csv";
  paths.eval_svg = dir + "/eval_" + name + ".svg";
  train::write_eval_report(paths, "t", "w.safetensors", "valid.jsonl.gz", m, {});
  return paths.eval_json;
}

/// The comparison table of settings written as lcm-eval --compare's arguments ([LABEL:]FILES).
std::string compare_settings(const std::vector<std::string>& settings) {
  std::vector<train::ReportGroup> groups;
  for (const std::string& s : settings) groups.push_back(train::load_report_group(s));
  return train::compare_table(groups);
}

}  // namespace

TEST_CASE("read_eval_report reads what write_eval_report writes, null as NaN") {
  const std::string dir = test::temp_dir("cmp_read");
  const train::EvalReport r = train::read_eval_report(write_report(dir, "a", 0.5, true));
  CHECK(r.valid_file == "valid.jsonl.gz");
  REQUIRE(r.programs.size() == 3);
  CHECK(r.programs.at("function1")[0] == doctest::Approx(60.0));
  CHECK(r.programs.at("function1")[1] == doctest::Approx(0.6));
  CHECK(std::isnan(r.programs.at("function2")[1]));
  CHECK(r.mean[0] == doctest::Approx(60.0));
  CHECK(r.mean[1] == doctest::Approx(0.55));
  CHECK(r.mean[7] == doctest::Approx(50.0));
}

TEST_CASE("the MAPE before calibration: read from a calibrated report, the MAPE otherwise") {
  const std::string dir = test::temp_dir("cmp_cal");
  const train::EvalReport plain = train::read_eval_report(write_report(dir, "plain", 0.5, false));
  CHECK(plain.mean[8] == plain.mean[0]);  // "calibrated": false
  model::MetricsSummary m;
  model::ProgramMetrics pm;
  pm.program = "f";
  pm.n_schedules = 2;
  pm.mape = 40;
  m.programs.push_back(pm);
  m.mean_mape = 40;
  m.weighted_mape = 30;
  train::RunPaths paths;
  paths.eval_json = dir + "/eval_cal.json";
  paths.eval_csv = dir + "/eval_cal.csv";
  paths.eval_svg = dir + "/eval_cal.svg";
  train::CalibrationEffect e;
  e.applied = true;
  e.mean_mape = 125.5;
  e.weighted_mape = 99.25;
  train::write_eval_report(paths, "t", "w.safetensors", "valid.jsonl.gz", m, {}, e);
  const train::EvalReport cal = train::read_eval_report(paths.eval_json);
  CHECK(cal.mean[0] == 40.0);
  CHECK(cal.mean[8] == 125.5);
  const std::string table = train::compare_table(
      {train::ReportGroup{"plain", {plain}}, train::ReportGroup{"cal", {cal}}});
  CHECK(test::contains(table, "MAPE before calibration"));
  CHECK(test::contains(table, "125.50"));
}

TEST_CASE("compare_table: mean ± sd over seeds and paired per-program differences") {
  const std::string dir = test::temp_dir("cmp_table");
  // Setting A: seeds at 0.50, 0.52, 0.54; setting B: 0.60, 0.64 (B better on every program).
  for (double b : {0.50, 0.52, 0.54}) write_report(dir, "A_s" + std::to_string(int(b * 100)), b);
  write_report(dir, "B_s60", 0.60);
  write_report(dir, "B_s64", 0.64);
  const train::ReportGroup a = train::load_report_group("A:" + dir + "/eval_A_s*.json");
  const train::ReportGroup b =
      train::load_report_group("B:" + dir + "/eval_B_s60.json," + dir + "/eval_B_s64.json");
  CHECK(a.label == "A");
  CHECK(a.reports.size() == 3);
  CHECK(b.reports.size() == 2);
  const std::string t = train::compare_table({a, b});
  MESSAGE(t);
  // Spearman means: A 0.62 ± 0.02 (0.60, 0.62, 0.64), B 0.72 ± 0.0283 (0.70, 0.74).
  CHECK(t.find("0.6200 ± 0.0200") != std::string::npos);
  CHECK(t.find("0.7200 ± 0.0283") != std::string::npos);
  // MAPE means in percent: A 62.00 ± 2.00.
  CHECK(t.find("62.00 ± 2.00") != std::string::npos);
  // Paired: every program's mean rises by 0.10 (A 0.52 + off, B 0.62 + off): d = +0.1000, no
  // spread; B is better in 3/3 on Spearman and worse (higher) in MAPE: better 0/3.
  CHECK(t.find("B − A (paired over programs)") != std::string::npos);
  CHECK(t.find("+0.1000 ± 0.0000") != std::string::npos);
  CHECK(t.find("+10.00 ± 0.00") != std::string::npos);
  CHECK(t.find("3/3 programs") != std::string::npos);
  CHECK(t.find("0/3 programs") != std::string::npos);
}

TEST_CASE("compare: one report per setting prints no sd; a lone setting and bad reports fail") {
  const std::string dir = test::temp_dir("cmp_bad");
  const std::string a = write_report(dir, "a", 0.5), b = write_report(dir, "b", 0.4);
  const std::string t = compare_settings({a, b});
  CHECK(t.find("0.6000 ") != std::string::npos);
  CHECK(t.find("0.6000 ±") == std::string::npos);
  CHECK(t.find("-0.1000 ± 0.0000") != std::string::npos);
  CHECK_THROWS_AS(compare_settings({a}), std::invalid_argument);
  CHECK_THROWS_WITH_AS(train::load_report_group(dir + "/nothing_*.json"),
                       doctest::Contains("no file matches"), std::runtime_error);
  CHECK_THROWS_WITH_AS(train::read_eval_report(dir + "/absent.json"),
                       doctest::Contains("cannot open"), std::runtime_error);
  lcm::atomic_write_file(dir + "/broken.json", "{\"format\": \"lcm-eval-report\", ");
  CHECK_THROWS_WITH_AS(train::read_eval_report(dir + "/broken.json"), doctest::Contains("not JSON"),
                       std::runtime_error);
  lcm::atomic_write_file(dir + "/other.json", "{\"format\": \"lcm-history\"}");
  CHECK_THROWS_WITH_AS(train::read_eval_report(dir + "/other.json"),
                       doctest::Contains("not an lcm-eval report"), std::runtime_error);
  lcm::atomic_write_file(dir + "/v9.json",
                         "{\"format\": \"lcm-eval-report\", \"format_version\": 9}");
  CHECK_THROWS_WITH_AS(train::read_eval_report(dir + "/v9.json"),
                       doctest::Contains("unknown format_version"), std::runtime_error);
  lcm::atomic_write_file(dir + "/badfield.json",
                         "{\"format\": \"lcm-eval-report\", \"format_version\": 2, \"mean\": "
                         "{\"mape\": \"x\"}}");
  CHECK_THROWS_WITH_AS(train::read_eval_report(dir + "/badfield.json"),
                       doctest::Contains("\"mape\" is not a number"), std::runtime_error);
}

TEST_CASE("compare: equal values are ties, a partial mean says so, duplicates are refused") {
  const std::string dir = test::temp_dir("cmp_ties");
  const std::string a = write_report(dir, "a", 0.5), b = write_report(dir, "b", 0.5);
  const std::string t = compare_settings({a, b});
  CHECK(t.find("0/3 programs (3 tied)") != std::string::npos);
  // One of two reports has an undefined mean Spearman: the mean says it stands on 1 of 2.
  const std::string nan_mean = dir + "/eval_n.json";
  {
    std::string text = test::slurp(write_report(dir, "n0", 0.7));
    const size_t at = text.find("\"spearman\"");  // the first one: the means
    const size_t end = text.find(',', at);
    text.replace(at, end - at, "\"spearman\": null");
    lcm::atomic_write_file(nan_mean, text);
  }
  const std::string t2 = compare_settings({"p:" + nan_mean + "," + a, b});
  CHECK(t2.find("0.6000 (1 of 2)") != std::string::npos);
  CHECK_THROWS_WITH_AS(train::load_report_group(a + "," + a), doctest::Contains("named twice"),
                       std::runtime_error);
  CHECK_THROWS_WITH_AS(compare_settings({"x:" + a, "x:" + b}),
                       doctest::Contains("two settings are labelled x"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(compare_settings({"x:" + a, "y:" + a}),
                       doctest::Contains("is in settings x and y"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(train::read_eval_report(dir), doctest::Contains("is a directory"),
                       std::runtime_error);
}

TEST_CASE("lcm-eval --compare on the command line") {
  const std::string dir = test::temp_dir("cmp_cli");
  write_report(dir, "x_s1", 0.50);
  write_report(dir, "x_s2", 0.52);
  write_report(dir, "y_s1", 0.70);
  const auto ok = test::run_tool(
      dir, "lcm-eval", "--compare 'x:" + dir + "/eval_x_s*.json' 'y:" + dir + "/eval_y_s1.json'");
  CHECK(ok.code == 0);
  CHECK(ok.out.find("y − x (paired over programs)") != std::string::npos);
  CHECK(ok.out.find("x: 2 report(s), 3 programs") != std::string::npos);
  const auto missing = test::run_tool(
      dir, "lcm-eval", "--compare " + dir + "/eval_x_s1.json " + dir + "/absent.json");
  CHECK(missing.code == 1);
  CHECK(missing.err.find("absent.json: cannot open the report") != std::string::npos);
  const auto lone = test::run_tool(dir, "lcm-eval", "--compare " + dir + "/eval_x_s1.json");
  CHECK(lone.code == 2);
  CHECK(lone.err.find("at least two settings") != std::string::npos);
  const auto same = test::run_tool(
      dir, "lcm-eval", "--compare x:" + dir + "/eval_x_s1.json x:" + dir + "/eval_y_s1.json");
  CHECK(same.code == 2);
  CHECK(same.err.find("two settings are labelled x") != std::string::npos);
}
