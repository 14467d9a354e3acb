// The acceptance check of BF16 weights (lcm-serve --weights bf16, issue 43): a trained
// checkpoint's predictions of every schedule of a LOOPerSet file with FP32 weights and with BF16
// weights, each schedule asked alone as a search asks (liblcm, one schedule per call: the
// one-row products that read the BF16 copies, the memo on as served), and the two criteria:
//   1. mean per-program Spearman (lcm-eval's, against the measured speedups) within 0.001;
//   2. the same top-1 schedule (highest prediction) for at least 99% of the programs.
// Uncalibrated predictions (eval.calibrated=false) by default: lcm-eval ranks by them, and a
// monotone map with flat steps could tie schedules the model orders; --calibrated 1 compares the
// answers a search gets from a checkpoint with a calibration map.
//
// Usage: bench_bf16_ranking --weights CKPT [--data FILE.jsonl.gz] [--threads 1] [--calibrated 0|1]
// Prints both criteria, further measures of the difference, and "accepted: yes|no" (exit 0), or
// exit 2 for bad arguments, 1 when the file holds no scorable program.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "lcm/lcm.hpp"

namespace {

/// One program's schedules that both formats scored and that have a measured speedup.
struct Scored {
  std::string name;
  std::vector<double> measured, fp32, bf16;
};

/// Index of the largest value (the first of equal ones).
size_t argmax(const std::vector<double>& v) {
  return size_t(std::max_element(v.begin(), v.end()) - v.begin());
}

}  // namespace

int main(int argc, char** argv) {
  std::string data = "../shared/data/looperset-sample/valid.jsonl.gz", weights;
  int threads = 1;
  bool calibrated = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--weights")
      weights = v;
    else if (a == "--data")
      data = v;
    else if (a == "--threads")
      threads = std::atoi(v.c_str());
    else if (a == "--calibrated")
      calibrated = v == "1";
    else {
      std::fprintf(stderr, "bench_bf16_ranking: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (weights.empty() || argc % 2 == 0) {
    std::fprintf(stderr, "usage: bench_bf16_ranking --weights CKPT [--data FILE] [--threads N]\n");
    return 2;
  }
  auto open = [&](const char* format) {
    lcm::PredictorOptions o;
    o.weights_path = weights;
    o.overrides = {"training.threads=" + std::to_string(threads),
                   std::string("eval.calibrated=") + (calibrated ? "true" : "false")};
    o.weights = format;
    return lcm::Predictor(o);
  };
  lcm::Predictor fp32 = open("fp32"), bf16 = open("bf16");
  std::vector<Scored> progs;
  double fp32_s = 0, bf16_s = 0;  // seconds of the one-schedule calls
  lcm::ProgramFile file(data);
  lcm::ProgramRecord r;
  while (file.next(r)) {
    Scored s;
    s.name = r.name;
    for (size_t i = 0; i < r.schedule_jsons.size(); ++i) {
      if (!std::isfinite(r.measured_speedups[i])) continue;
      const auto t0 = std::chrono::steady_clock::now();
      const lcm::Score a =
          fp32.score(r.program_json, {r.schedule_jsons[i]}, r.untransformed_json)[0];
      const auto t1 = std::chrono::steady_clock::now();
      const lcm::Score b =
          bf16.score(r.program_json, {r.schedule_jsons[i]}, r.untransformed_json)[0];
      const auto t2 = std::chrono::steady_clock::now();
      fp32_s += std::chrono::duration<double>(t1 - t0).count();
      bf16_s += std::chrono::duration<double>(t2 - t1).count();
      if (!a.ok() || !b.ok()) continue;
      s.measured.push_back(r.measured_speedups[i]);
      s.fp32.push_back(a.speedup);
      s.bf16.push_back(b.speedup);
    }
    if (!s.measured.empty()) progs.push_back(std::move(s));
  }
  if (progs.empty()) {
    std::fprintf(stderr, "bench_bf16_ranking: no scorable program in %s\n", data.c_str());
    return 1;
  }
  std::vector<std::string> names;
  std::vector<double> measured, p32, p16;
  int same_top1 = 0, ranked = 0;
  double max_dln = 0, sum_dln = 0;
  for (const Scored& s : progs) {
    for (size_t i = 0; i < s.measured.size(); ++i) {
      names.push_back(s.name);
      measured.push_back(s.measured[i]);
      p32.push_back(s.fp32[i]);
      p16.push_back(s.bf16[i]);
      const double d = std::fabs(std::log(s.fp32[i]) - std::log(s.bf16[i]));
      max_dln = std::max(max_dln, d);
      sum_dln += d;
    }
    if (s.measured.size() < 2) continue;
    ++ranked;
    same_top1 += argmax(s.fp32) == argmax(s.bf16) ? 1 : 0;
  }
  const lcm::MetricsSummary m32 = lcm::compute_metrics(names, measured, p32);
  const lcm::MetricsSummary m16 = lcm::compute_metrics(names, measured, p16);
  // the two formats' predictions ranked against each other, per program
  const lcm::MetricsSummary cross = lcm::compute_metrics(names, p32, p16);
  const double dspear = std::fabs(m32.mean_spearman - m16.mean_spearman);
  const double top1 = ranked ? double(same_top1) / ranked : 1.0;
  std::printf("bench_bf16_ranking: %s, %s: %zu programs, %zu schedules scored one per call, %s\n",
              weights.c_str(), data.c_str(), progs.size(), measured.size(),
              calibrated ? "calibrated" : "uncalibrated");
  std::printf("mean Spearman  fp32 %.6f  bf16 %.6f  |diff| %.6f  (criterion <= 0.001: %s)\n",
              m32.mean_spearman, m16.mean_spearman, dspear, dspear <= 0.001 ? "met" : "NOT met");
  std::printf(
      "same top-1     %d of %d programs with >= 2 schedules = %.4f  (criterion >= 0.99: %s)\n",
      same_top1, ranked, top1, top1 >= 0.99 ? "met" : "NOT met");
  std::printf(
      "also: mean nDCG fp32 %.6f bf16 %.6f; top-1 recovered fp32 %.6f bf16 %.6f; "
      "Spearman(fp32, bf16) per program mean %.6f; |d ln speedup| mean %.2e max %.2e\n",
      m32.mean_ndcg, m16.mean_ndcg, m32.mean_top1_recovered, m16.mean_top1_recovered,
      cross.mean_spearman, sum_dln / double(measured.size()), max_dln);
  std::printf("calls: fp32 %.1f µs, bf16 %.1f µs per schedule (mean; interleaved)\n",
              1e6 * fp32_s / double(measured.size()), 1e6 * bf16_s / double(measured.size()));
  std::printf("accepted: %s\n", dspear <= 0.001 && top1 >= 0.99 ? "yes" : "no");
  return 0;
}
