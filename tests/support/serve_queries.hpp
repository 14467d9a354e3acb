// A LOOPerSet program record turned into what the Tiramisu autoscheduler sends lcm-serve: the
// program annotation (with function_name), the untransformed schedule and every schedule, all
// without execution_times. Used by test_serve and bench_serve. No doctest here.
#pragma once
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "data/dataset.hpp"
#include "engine/rng.hpp"
#include "model/cost_model.hpp"
#include "model/input_scaling.hpp"
#include "train/checkpoint.hpp"
#include "train/evaluate.hpp"

namespace lcm::test {

/// `v` as compact JSON text.
inline std::string json_text(const rapidjson::Value& v) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  v.Accept(w);
  return std::string(sb.GetString(), sb.GetSize());
}

/// One program as the autoscheduler's queries carry it.
struct QueryProgram {
  std::string name;
  std::string program;                 // program_annotation with function_name
  std::string untransformed;           // schedules_list[0] without execution_times
  std::vector<std::string> schedules;  // every schedule of the record, without execution_times
  int n_comps = 0;                     // computations of the program
};

/// The queries of one JSONL record (program_name, program_annotation, schedules_list). Throws
/// std::runtime_error when the record lacks them.
inline QueryProgram query_program(const std::string& record_json) {
  rapidjson::Document d;
  d.Parse(record_json.c_str(), record_json.size());
  if (d.HasParseError() || !d.IsObject() || !d.HasMember("program_name") ||
      !d.HasMember("program_annotation") || !d.HasMember("schedules_list") ||
      !d["schedules_list"].IsArray() || d["schedules_list"].Empty())
    throw std::runtime_error("query_program: not a program record with schedules");
  QueryProgram q;
  q.name = d["program_name"].GetString();
  rapidjson::Value& ann = d["program_annotation"];
  if (!ann.HasMember("function_name"))
    ann.AddMember("function_name", rapidjson::Value(q.name.c_str(), d.GetAllocator()),
                  d.GetAllocator());
  if (ann.HasMember("computations") && ann["computations"].IsObject())
    q.n_comps = int(ann["computations"].MemberCount());
  q.program = json_text(ann);
  for (auto& s : d["schedules_list"].GetArray()) {
    rapidjson::Value copy(s, d.GetAllocator());
    copy.RemoveMember("execution_times");
    q.schedules.push_back(json_text(copy));
  }
  q.untransformed = q.schedules[0];
  return q;
}

/// Writes a release-size cost model (2.1M weights) with every weight drawn uniformly in ±0.05
/// (the reference init zeroes the concat layers, which would make every schedule score alike),
/// log-speedup output and the "log" input scaling, so that a served query must be scaled as
/// lcm-predict scales it. Throws what save_checkpoint throws.
inline void write_random_checkpoint(const std::string& path, uint64_t seed = 11) {
  model::ModelConfig mc;
  mc.log_output = true;
  model::CostModel<float> m(mc, 7);
  Rng rng(seed);
  for (auto& p : m.params().all())
    for (auto& v : p.value) v = float(rng.uniform(-0.05, 0.05));
  model::InputScaling sc;
  sc.mode = "log";
  train::save_checkpoint(path, m, {{"lcm.input_scaling", sc.to_json()}});
}

/// The predictions of `predictions` (made over `dataset`) for program `name`, each with the
/// index of its schedule in the program's record: the order of QueryProgram::schedules and of a
/// Scorer's answer.
inline std::vector<std::pair<size_t, const train::Prediction*>> predictions_of(
    const std::string& name, const std::vector<train::Prediction>& predictions,
    const data::Dataset& dataset) {
  std::vector<std::pair<size_t, const train::Prediction*>> out;
  for (const train::Prediction& x : predictions) {
    const data::ProgramFeatures& pf = dataset.programs[size_t(x.program)];
    if (pf.name == name) out.emplace_back(size_t(pf.schedule_index[size_t(x.schedule)]), &x);
  }
  return out;
}

}  // namespace lcm::test
