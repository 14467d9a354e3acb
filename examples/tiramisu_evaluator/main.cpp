// An evaluator with the shape of the Tiramisu autoscheduler's evaluate_by_learning_model, calling
// the cost model in-process through liblcm instead of a Python model process over pipes.
//
// Usage: tiramisu_evaluator CHECKPOINT QUERIES
// QUERIES holds the autoscheduler's query lines, three per query (program annotation,
// untransformed schedule, candidate schedule, one JSON object per line), as lcm-serve reads
// them; the example prints one predicted speedup per query, as lcm-serve answers.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <lcm/lcm.hpp>
#include <string>

/// What a search calls per candidate: program and schedule JSON in, predicted speedup out.
class LcmEvaluator {
 public:
  explicit LcmEvaluator(const std::string& checkpoint) : model_(checkpoint) {}

  /// The candidate's predicted speedup over the untransformed program (higher is better);
  /// 0 when lcm cannot score the schedule or the program (the reason goes to stderr).
  float evaluate(const std::string& program_json, const std::string& untransformed_json,
                 const std::string& schedule_json) {
    try {
      const std::vector<lcm::Score> s =
          model_.score(program_json, {schedule_json}, untransformed_json);
      if (!s[0].ok()) std::cerr << "evaluator: schedule: " << s[0].reason << "\n";
      return float(s[0].speedup);
    } catch (const lcm::Error& e) {
      std::cerr << "evaluator: program: " << e.what() << "\n";
      return float(lcm::Predictor::error_speedup);
    }
  }

 private:
  lcm::Predictor model_;
};

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: tiramisu_evaluator CHECKPOINT QUERIES\n";
    return 2;
  }
  try {
    LcmEvaluator evaluator(argv[1]);
    std::ifstream in(argv[2]);
    if (!in) {
      std::cerr << "tiramisu_evaluator: cannot open " << argv[2] << "\n";
      return 1;
    }
    std::string program, untransformed, candidate;
    while (std::getline(in, program) && std::getline(in, untransformed) &&
           std::getline(in, candidate))
      std::printf("%.9g\n", double(evaluator.evaluate(program, untransformed, candidate)));
  } catch (const lcm::Error& e) {
    std::cerr << "tiramisu_evaluator: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
