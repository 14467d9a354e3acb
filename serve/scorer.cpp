// The program cache and batched scoring of lcm-serve and liblcm (see scorer.hpp).
#include "serve/scorer.hpp"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <cmath>
#include <functional>
#include <string_view>
#include <utility>

#include "data/reader.hpp"
#include "engine/device_memory.hpp"
#include "engine/rng.hpp"
#include "engine/tape.hpp"
#include "train/splits.hpp"

namespace lcm::serve {

/// One cached program: parsed with its untransformed schedule as schedule 0, featurized, and
/// the model's per-program rows. `mu` guards `program` (parse_schedule_json updates its form
/// counts) and `query` (the descriptors of the schedules being assembled).
struct Scorer::Entry {
  uint64_t hash = 0;
  std::string program_json, untransformed_json;  // the key, compared on a hash hit
  data::Program program;
  data::LoopTree tree0;            // schedule 0's tree_structure, else the iterators' tree
  data::ProgramFeatures features;  // featurize(program): statics, expressions, tree
  data::ProgramFeatures query;     // features without schedules: the rows of each query
  // [member]: CostModel::program_rows [C, H0]; none with an encoder
  std::vector<std::vector<float>> rows;
  // [member]: f(untransformed) of a relative_to_identity model; none otherwise
  std::vector<float> identity_output;
  std::mutex mu;
};

namespace {

uint64_t key_hash(const std::string& a, const std::string& b) {
  const uint64_t h1 = std::hash<std::string_view>()(a), h2 = std::hash<std::string_view>()(b);
  return h1 ^ (h2 + 0x9e3779b97f4a7c15ull + (h1 << 6) + (h1 >> 2));
}

/// Parses one line of a query as a JSON object; throws QueryError "malformed_json" / "bad_field"
/// naming `what` and the byte offset in that line.
void parse_object(rapidjson::Document& d, const std::string& text, const char* what) {
  d.Parse<rapidjson::kParseIterativeFlag>(text.data(), text.size());
  if (d.HasParseError())
    throw QueryError("malformed_json", std::string("malformed_json: ") +
                                           rapidjson::GetParseError_En(d.GetParseError()) +
                                           " at byte " + std::to_string(d.GetErrorOffset()) +
                                           " of the " + what);
  if (!d.IsObject())
    throw QueryError("bad_field", std::string("bad_field: the ") + what + " is not a JSON object");
}

/// The program's name for messages: its function_name, else "program". Throws as parse_object.
std::string function_name(const std::string& program_json) {
  rapidjson::Document d;
  parse_object(d, program_json, "program");
  const auto it = d.FindMember("function_name");
  if (it != d.MemberEnd() && it->value.IsString() && it->value.GetStringLength() > 0)
    return std::string(it->value.GetString(), it->value.GetStringLength());
  return "program";
}

/// The first event of `log` as a QueryError (or a generic one when the log holds none).
[[noreturn]] void fail_from(const data::SkipLog& log, const std::string& fallback) {
  for (const data::SkipEvent& e : log.events())
    if (e.level != "note")
      throw QueryError(e.reason, e.reason + (e.detail.empty() ? "" : ": " + e.detail));
  throw QueryError("bad_program", fallback);
}

}  // namespace

Scorer::Scorer(const config::Config& c, size_t cache_entries)
    : predictor_(c), capacity_(cache_entries) {
  if (cache_entries == 0)
    throw std::invalid_argument("Scorer: the program cache needs at least 1 entry");
  stats_.capacity = int64_t(cache_entries);
  // The data.* reading and feature options of every other tool; loop_level_base auto counts
  // typed loop levels from 0 (a query is too small to prove either base).
  const data::PrepareOptions po = train::prepare_options(c, "valid");  // its data.* options only
  read_ = po.read;
  read_.loop_level_base = po.loop_level_base == data::LoopLevelBase::One ? 1 : 0;
  features_ = po.features;
  features_.keep_unlabeled = true;  // a query has no measurements
  // Predict where the Predictor put the weights.
  if (c.training.device.kind == lcm::Device::CUDA)
    tape_.set_device(lcm::Device::CUDA, c.training.device.index);
  // Served weights never change: the first layer's schedule columns are gathered once.
  if (tape_.device() == lcm::Device::CPU &&
      predictor_.model().config().encoder.kind == lcm::model::EncoderKind::None)
    for (int k = 0; k < predictor_.members(); ++k)
      sched_weight_.push_back(predictor_.member(k).schedule_weight());
}

Scorer::~Scorer() = default;

CacheStats Scorer::cache_stats() const {
  std::lock_guard<std::mutex> lock(cache_mu_);
  CacheStats s = stats_;
  s.entries = int64_t(lru_.size());
  return s;
}

std::shared_ptr<Scorer::Entry> Scorer::build(const std::string& program_json,
                                             const std::string& untransformed_json) {
  auto e = std::make_shared<Entry>();
  e->program_json = program_json;
  e->untransformed_json = untransformed_json;
  e->hash = key_hash(program_json, untransformed_json);
  // The record parse_program reads: the program line as program_annotation, the untransformed
  // schedule as schedule 0.
  data::RawRecord rec;
  rec.file = "query";
  rec.line = 1;
  rec.name_hint = function_name(program_json);
  if (!untransformed_json.empty()) {
    rapidjson::Document d;
    parse_object(d, untransformed_json, "untransformed schedule");
    // a program annotation where the schedule belongs: the caller's lines are out of step
    if (d.HasMember("iterators") && d.HasMember("computations"))
      throw QueryError("not_a_schedule",
                       "not_a_schedule: the untransformed schedule has the program annotation's "
                       "iterators and computations (are the query's lines out of step?)");
  }
  const std::string s0 = untransformed_json.empty() ? std::string("{}") : untransformed_json;
  rec.json.reserve(program_json.size() + s0.size() + 64);
  rec.json += "{\"program_annotation\":";
  rec.json += program_json;
  rec.json += ",\"schedules_list\":[";
  rec.json += s0;
  rec.json += "]}";
  data::SkipLog log(false, 0);
  std::optional<data::Program> p = data::parse_program(rec, log, read_);
  if (!p) fail_from(log, "the program could not be read");
  // The program line itself malformed shows as a malformed record: say which line it was.
  e->program = std::move(*p);
  if (!e->program.schedules[0].parse_problem.empty())
    throw QueryError(e->program.schedules[0].parse_problem,
                     "untransformed schedule: " + e->program.schedules[0].parse_problem + ": " +
                         e->program.schedules[0].parse_detail);
  // the reference of every relative score and the program's loop tree: never a transformed one
  if (const std::string does = data::first_transformation(e->program, e->program.schedules[0]);
      !does.empty())
    throw QueryError("transformed_schedule0",
                     "transformed_schedule0: the untransformed schedule holds " + does);
  std::optional<data::ProgramFeatures> f = data::featurize(e->program, features_, log);
  if (!f) fail_from(log, "the program was dropped by the feature rules");
  e->features = std::move(*f);
  // The model walks this tree: a computation it does not place would silently not count.
  {
    std::vector<bool> placed(size_t(e->features.n_comps), false);
    for (const data::TreeNode& n : e->features.tree.nodes)
      for (int c : n.comp_indices)
        if (c >= 0 && c < e->features.n_comps) placed[size_t(c)] = true;
    std::string missing;
    int n_missing = 0;
    for (int c = 0; c < e->features.n_comps; ++c)
      if (!placed[size_t(c)]) {
        if (n_missing++ < 5)
          missing += (missing.empty() ? "" : ", ") + e->program.computations[size_t(c)].name;
      }
    if (n_missing > 0)
      throw QueryError(
          "bad_tree", "bad_tree: the loop tree (" +
                          std::string(e->program.schedules[0].tree ? "the untransformed schedule's "
                                                                     "tree_structure"
                                                                   : "the iterators' links") +
                          ") places no loop around " + std::to_string(n_missing) + " of " +
                          std::to_string(e->features.n_comps) + " computations (" + missing +
                          (n_missing > 5 ? ", ..." : "") + ")");
  }
  e->tree0 = e->program.schedules[0].tree ? *e->program.schedules[0].tree
                                          : data::tree_from_iterators(e->program);
  e->program.schedules.clear();  // queries bring their own; schedule 0 lives in `features`
  e->query.name = e->features.name;
  e->query.n_comps = e->features.n_comps;
  e->query.n_loops = e->features.n_loops;
  e->query.comp_static = e->features.comp_static;
  e->query.statics = e->features.statics;
  e->query.expr = e->features.expr;  // program_batch copies it into each query's batch
  e->query.identity_descriptor = e->features.identity_descriptor;

  // The per-program rows of each member, from schedule 0's batch (its static columns are every
  // schedule's).
  const lcm::model::ModelConfig& mc = predictor_.model().config();
  if (mc.encoder.kind == lcm::model::EncoderKind::None) {
    data::BatchTensors bt = data::program_batch(e->features, 0, 1);
    predictor_.scaling().apply(bt);
    std::lock_guard<std::mutex> lock(model_mu_);
    for (int k = 0; k < predictor_.members(); ++k) {
      e->rows.push_back(
          predictor_.member(k).program_rows(tape_, data::BatchTrees{&e->features.tree}, bt));
      tape_.clear();
    }
  }
  // A model relative to the untransformed schedule: each member's output for it, once per
  // program, is subtracted from that member's output for every schedule
  // (ModelConfig::relative_to_identity).
  if (mc.relative_to_identity) {
    data::BatchTensors ib = data::identity_batch(e->features, 0);
    predictor_.scaling().apply(ib);
    std::lock_guard<std::mutex> lock(model_mu_);
    tape_.clear();
    tape_.set_training(false);
    tape_.set_grad_enabled(false);
    for (int k = 0; k < predictor_.members(); ++k) {
      lcm::Rng rng(0);
      const lcm::NodeId f0 = predictor_.member(k).forward(tape_, e->features.tree, ib, rng);
      e->identity_output.push_back(lcm::to_host(tape_.value(f0))[0]);
      tape_.clear();
    }
  }
  return e;
}

std::shared_ptr<Scorer::Entry> Scorer::program(const std::string& program_json,
                                               const std::string& untransformed_json) {
  const uint64_t h = key_hash(program_json, untransformed_json);
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    auto it = index_.find(h);
    if (it != index_.end())
      for (auto pos : it->second)
        if ((*pos)->program_json == program_json &&
            (*pos)->untransformed_json == untransformed_json) {
          lru_.splice(lru_.begin(), lru_, pos);  // iterators stay valid
          ++stats_.hits;
          return *pos;
        }
    ++stats_.misses;
  }
  // Built outside the lock (other programs' queries go on); two threads missing on the same new
  // program both build it, and the second insert finds the first.
  std::shared_ptr<Entry> e = build(program_json, untransformed_json);
  std::lock_guard<std::mutex> lock(cache_mu_);
  auto& bucket = index_[h];
  for (auto pos : bucket)
    if ((*pos)->program_json == program_json && (*pos)->untransformed_json == untransformed_json)
      return *pos;
  lru_.push_front(e);
  bucket.push_back(lru_.begin());
  while (lru_.size() > capacity_) {
    auto last = std::prev(lru_.end());
    auto& b = index_[(*last)->hash];
    for (size_t i = 0; i < b.size(); ++i)
      if (b[i] == last) {
        b.erase(b.begin() + long(i));
        break;
      }
    if (b.empty()) index_.erase((*last)->hash);
    lru_.erase(last);  // queries still scoring it keep their shared_ptr
    ++stats_.evictions;
  }
  return e;
}

std::vector<ScheduleScore> Scorer::score(const std::string& program_json,
                                         const std::string& untransformed_json,
                                         const std::vector<std::string>& schedules) {
  std::vector<ScheduleScore> out(schedules.size());
  if (schedules.empty()) return out;
  std::shared_ptr<Entry> e = program(program_json, untransformed_json);

  // Features of the schedules that can be scored, as one batch of one program.
  std::vector<size_t> scored;        // indices into `schedules`
  std::vector<bool> identity_query;  // [scored]: the schedule is the untransformed one
  data::BatchTensors bt;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    data::ProgramFeatures& q = e->query;
    q.descriptor_bytes.clear();
    q.descriptor_end.clear();
    q.schedule_index.clear();
    for (size_t i = 0; i < schedules.size(); ++i) {
      data::Schedule s = data::parse_schedule_json(schedules[i], e->program, read_);
      std::optional<data::ScheduleProblem> d = data::describe_schedule(
          e->program, e->features, e->tree0, s, features_, q.descriptor_bytes);
      if (d) {
        out[i].reason = d->reason;
        out[i].detail = d->detail;
        continue;
      }
      q.descriptor_end.push_back(q.descriptor_bytes.size());
      q.schedule_index.push_back(int32_t(i));
      scored.push_back(i);
    }
    q.speedup.assign(scored.size(), std::nanf(""));
    for (size_t k = 0; k < scored.size(); ++k) identity_query.push_back(q.is_identity(int64_t(k)));
    bt = data::program_batch(q, 0, int64_t(scored.size()));
  }
  if (scored.empty()) return out;
  predictor_.scaling().apply(bt);

  const data::BatchTrees trees{&e->features.tree};
  const int members = predictor_.members();
  // Σ over members of each schedule's score (relative models: minus the member's untransformed
  // output), summed in the order Predictor::predict sums them
  std::vector<double> sum(scored.size(), 0.0);
  {
    std::lock_guard<std::mutex> lock(model_mu_);
    tape_.clear();
    tape_.set_training(false);
    tape_.set_grad_enabled(false);
    for (int m = 0; m < members; ++m) {
      lcm::model::CostModel<float>& model = predictor_.member(m);
      lcm::Rng rng(0);
      lcm::NodeId pred;
      if (!e->rows.empty()) {
        lcm::model::ForwardInputs<float> in =
            model.prepare_shared_inputs(trees, bt, &e->rows[size_t(m)]);
        if (!sched_weight_.empty()) in.sched_weight = sched_weight_[size_t(m)].data();
        pred = model.forward(tape_, trees, in, rng);
      } else {
        pred = model.forward(tape_, trees, bt, rng);
      }
      const std::vector<float> y = lcm::to_host(tape_.value(pred));
      tape_.clear();
      const float f0 = e->identity_output.empty() ? 0.0f : e->identity_output[size_t(m)];
      for (size_t k = 0; k < scored.size(); ++k) sum[k] += double(y[k] - f0);
    }
  }
  const bool relative = predictor_.model().config().relative_to_identity;
  for (size_t k = 0; k < scored.size(); ++k) {
    // relative to the untransformed schedule: that schedule itself scores 0 (1×) exactly
    const double score = relative && identity_query[k] ? 0.0 : sum[k] / double(members);
    const double v = predictor_.speedup_of(score);
    if (!std::isfinite(v))
      throw std::runtime_error("the model predicted a non-finite speedup for schedule " +
                               std::to_string(scored[k]) + " of " + e->features.name +
                               " (broken weights in " + predictor_.weights_path() + "?)");
    out[scored[k]].speedup = v;
  }
  return out;
}

}  // namespace lcm::serve
