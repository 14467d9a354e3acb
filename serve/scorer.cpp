// The program cache and batched scoring of lcm-serve and liblcm (see scorer.hpp).
#include "serve/scorer.hpp"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <string_view>
#include <utility>

#include "data/reader.hpp"
#include "engine/device_memory.hpp"
#include "engine/tape.hpp"
#include "model/scoring.hpp"
#include "train/splits.hpp"
#include "util/atomic_file.hpp"
#include "util/fnv1a.hpp"

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
  // [member][1]: f(untransformed) of a relative_to_identity model; none otherwise
  std::vector<std::vector<float>> identity_output;
  ProgramShape shape;  // its size for the memory estimates
  // what it holds in the cache: RequestMemory::entry_bytes(shape) + members · memo_bytes
  size_t bytes = 0;
  // [member]: the memo of the schedule-dependent forward (model_mu_ guards it); none when
  // ScorerOptions::memo_bytes is 0 or the model has an encoder
  std::vector<lcm::model::ForwardMemo> memo;
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

/// The program's name for messages (its function_name, else "program") and its size, from one
/// parse of its JSON. Throws as parse_object.
std::string name_and_shape(const std::string& program_json, ProgramShape& shape) {
  rapidjson::Document d;
  parse_object(d, program_json, "program");
  shape = program_shape(d, program_json.size());
  const auto it = d.FindMember("function_name");
  if (it != d.MemberEnd() && it->value.IsString() && it->value.GetStringLength() > 0)
    return std::string(it->value.GetString(), it->value.GetStringLength());
  return "program";
}

/// "<name> (C computations, L loops)" for messages.
std::string program_words(const std::string& name, const ProgramShape& p) {
  return name + " (" + std::to_string(p.comps) + " computations, " + std::to_string(p.loops) +
         " loops)";
}

/// The parameters of every member of `p` in bytes.
size_t model_bytes(const train::Predictor& p) {
  size_t b = 0;
  for (int k = 0; k < p.members(); ++k)
    for (const auto& t : p.member(k).params().all())
      b += (t.value.size() + t.grad.size()) * sizeof(float);  // a store holds both
  return b;
}

/// The first event of `log` as a QueryError (or a generic one when the log holds none).
[[noreturn]] void fail_from(const data::SkipLog& log, const std::string& fallback) {
  for (const data::SkipEvent& e : log.events())
    if (e.level != "note")
      throw QueryError(e.reason, e.reason + (e.detail.empty() ? "" : ": " + e.detail));
  throw QueryError("bad_program", fallback);
}

constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// The bytes of `v` (float32, this machine's order: little-endian on every supported target) as
/// base64.
std::string floats_base64(const std::vector<float>& v) {
  const auto* b = reinterpret_cast<const unsigned char*>(v.data());
  const size_t n = v.size() * sizeof(float);
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t x = uint32_t(b[i]) << 16 | (i + 1 < n ? uint32_t(b[i + 1]) << 8 : 0) |
                       (i + 2 < n ? uint32_t(b[i + 2]) : 0);
    out += kBase64[x >> 18 & 63];
    out += kBase64[x >> 12 & 63];
    out += i + 1 < n ? kBase64[x >> 6 & 63] : '=';
    out += i + 2 < n ? kBase64[x & 63] : '=';
  }
  return out;
}

/// floats_base64's inverse into `v` (whose size says how many floats); false when `text` is not
/// that many floats in base64.
bool base64_floats(const std::string& text, std::vector<float>& v) {
  const size_t n = v.size() * sizeof(float);
  if (text.size() != (n + 2) / 3 * 4) return false;
  std::vector<unsigned char> bytes;
  bytes.reserve(n + 2);
  for (size_t i = 0; i < text.size(); i += 4) {
    uint32_t x = 0;
    int pad = 0;
    for (size_t j = 0; j < 4; ++j) {
      const char c = text[i + j];
      const char* at = c == '=' ? nullptr : std::strchr(kBase64, c);
      if (c == '=') {
        ++pad;
      } else if (!at || c == 0 || pad) {
        return false;
      }
      x = x << 6 | uint32_t(at ? at - kBase64 : 0);
    }
    bytes.push_back((unsigned char)(x >> 16));
    if (pad < 2) bytes.push_back((unsigned char)(x >> 8));
    if (pad < 1) bytes.push_back((unsigned char)x);
  }
  if (bytes.size() != n) return false;
  std::memcpy(v.data(), bytes.data(), n);
  for (float f : v)
    if (!std::isfinite(f)) return false;
  return true;
}

}  // namespace

namespace {
ScorerOptions with_cache(size_t cache_entries) {
  ScorerOptions o;
  o.cache_entries = cache_entries;
  return o;
}
}  // namespace

Scorer::Scorer(const config::Config& c, size_t cache_entries)
    : Scorer(c, with_cache(cache_entries)) {}

namespace {
/// The Predictor of `c`, with BF16 weight copies when `bf16`.
train::Predictor predictor_with(const config::Config& c, bool bf16) {
  train::Predictor p(c);
  if (bf16) p.use_bf16_weights();
  return p;
}
}  // namespace

Scorer::Scorer(const config::Config& c, const ScorerOptions& o)
    : predictor_(predictor_with(c, o.bf16_weights)),
      capacity_(o.cache_entries),
      memory_(predictor_.model().config(), predictor_.members()),
      gate_(o.max_request_bytes, model_bytes(predictor_) + kProcessBytes),
      tape_(std::make_unique<lcm::Tape<float>>()) {
  if (o.cache_entries == 0)
    throw std::invalid_argument("Scorer: the program cache needs at least 1 entry");
  if (gate_.capacity() < (size_t(16) << 20))
    throw config::ConfigError(
        "--max-request-memory: the memory bound of " + std::to_string(o.max_request_bytes >> 20) +
        " MiB leaves less than 16 MiB beside the model (" +
        std::to_string(model_bytes(predictor_) >> 20) + " MiB) and the process's own " +
        std::to_string(kProcessBytes >> 20) + " MiB (lcm-serve --max-request-memory)");
  cache_capacity_bytes_ = gate_.capacity() / 2;
  memo_bytes_ = c.training.device.kind == lcm::Device::CPU ? o.memo_bytes : 0;
  stats_.capacity = int64_t(o.cache_entries);
  stats_.capacity_bytes = cache_capacity_bytes_;
  // The weights' identity (FNV-1a 64 over every member's parameters): an adaptation state
  // learned with other weights is refused on load.
  {
    uint64_t h = kFnv1a64Offset;
    for (int k = 0; k < predictor_.members(); ++k)
      for (const auto& t : predictor_.member(k).params().all())
        h = fnv1a64(t.value.data(), t.value.size() * sizeof(float), h);
    char buf[32];
    std::snprintf(buf, sizeof buf, "fnv1a64:%016llx", static_cast<unsigned long long>(h));
    model_id_ = buf;
  }
  // The data.* reading and feature options of every other tool, as the checkpoint was trained
  // (predictor_.config()); loop_level_base auto counts typed loop levels from 0 (a query is too
  // small to prove either base).
  const data::PrepareOptions po =
      train::prepare_options(predictor_.config(), "valid");  // its data.* options only
  read_ = po.read;
  read_.loop_level_base = po.loop_level_base == data::LoopLevelBase::One ? 1 : 0;
  features_ = po.features;
  features_.keep_unlabeled = true;  // a query has no measurements
  // Predict where the Predictor put the weights.
  if (c.training.device.kind == lcm::Device::CUDA)
    tape_->set_device(lcm::Device::CUDA, c.training.device.index);
  // Served weights never change: the first layer's schedule columns are gathered once.
  if (tape_->device() == lcm::Device::CPU &&
      predictor_.model().config().encoder.kind == lcm::model::EncoderKind::None)
    for (int k = 0; k < predictor_.members(); ++k)
      sched_weight_.push_back(predictor_.member(k).schedule_weight());
  learning_ = o.learning;
  ft_ = o.finetune;
  try {
    ft_.validate();
  } catch (const std::invalid_argument& e) {
    throw config::ConfigError(e.what());
  }
  if (learns_finetune(learning_) && tape_->device() != lcm::Device::CPU)
    throw config::ConfigError(std::string("learning ") + learning_name(learning_) +
                              ": fine-tuning during search runs on the CPU only "
                              "(training.device=cpu)");
}

Scorer::~Scorer() {
  stop_worker();
}

void Scorer::stop_worker() {
  {
    std::lock_guard<std::mutex> lock(learn_mu_);
    stop_ = true;
    jobs_.clear();
  }
  learn_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

CacheStats Scorer::cache_stats() const {
  std::vector<std::shared_ptr<Entry>> held;
  CacheStats s;
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    s = stats_;
    s.entries = int64_t(lru_.size());
    held.assign(lru_.begin(), lru_.end());
  }
  // the memos change only under the forward lock (taken after cache_mu_ is released)
  std::lock_guard<std::mutex> lock(model_mu_);
  for (const auto& e : held)
    for (const auto& m : e->memo) {
      s.memo_node_hits += m.node_hits;
      s.memo_node_misses += m.node_misses;
      s.memo_output_hits += m.output_hits;
      s.memo_output_misses += m.output_misses;
      s.memo_clears += m.clears;
    }
  return s;
}

size_t Scorer::cached_bytes() const {
  std::lock_guard<std::mutex> lock(cache_mu_);
  return stats_.bytes;
}

std::list<std::shared_ptr<Scorer::Entry>>::iterator Scorer::evict(
    std::list<std::shared_ptr<Entry>>::iterator it) {
  auto& b = index_[(*it)->hash];
  for (size_t i = 0; i < b.size(); ++i)
    if (b[i] == it) {
      b.erase(b.begin() + long(i));
      break;
    }
  if (b.empty()) index_.erase((*it)->hash);
  stats_.bytes -= std::min(stats_.bytes, (*it)->bytes);
  ++stats_.evictions;
  return lru_.erase(it);
}

bool Scorer::evict_one() {
  std::lock_guard<std::mutex> lock(cache_mu_);
  for (auto it = lru_.end(); it != lru_.begin();) {
    --it;
    if (it->use_count() > 1) continue;  // a request is scoring it: its bytes are still held
    evict(it);
    return true;
  }
  return false;
}

void Scorer::trim_tape() {
  if (tape_->arena().capacity_bytes() <= kArenaKeepBytes) return;
  peak_seen_ = std::max(peak_seen_, tape_->peak_bytes());
  const lcm::Device d = tape_->device();
  const int index = tape_->device_index();
  tape_ = std::make_unique<lcm::Tape<float>>();
  if (d == lcm::Device::CUDA) tape_->set_device(d, index);
}

void Scorer::release_arena() {
  std::lock_guard<std::mutex> lock(model_mu_);
  const lcm::Device d = tape_->device();
  const int index = tape_->device_index();
  tape_ = std::make_unique<lcm::Tape<float>>();
  if (d == lcm::Device::CUDA) tape_->set_device(d, index);
  peak_seen_ = 0;
}

Reservation Scorer::reserve(size_t bytes, const std::string& what) {
  const size_t held = MemoryGate::held_by_this_thread();
  if (held + bytes > gate_.capacity()) {
    {
      std::lock_guard<std::mutex> lock(cache_mu_);
      ++stats_.refused;
    }
    throw QueryError(
        "request_too_large",
        request_too_large_message(what, bytes, gate_.capacity() - std::min(held, gate_.capacity()),
                                  gate_.bound()));
  }
  gate_.acquire(
      bytes, [this] { return cached_bytes(); }, [this] { return evict_one(); });
  return Reservation(&gate_, bytes);
}

std::shared_ptr<Scorer::Entry> Scorer::build(const std::string& program_json,
                                             const std::string& untransformed_json) {
  // The JSON text's parse first (its name and size), then the whole build, each reserved from
  // its estimate before it allocates.
  const size_t text = program_json.size() + untransformed_json.size();
  const size_t dom =
      RequestMemory::json_bytes(program_json) + RequestMemory::json_bytes(untransformed_json);
  ProgramShape shape;
  std::string name;
  {
    Reservation r = reserve(dom, "parsing a program of " +
                                     std::to_string((text + (1 << 20) - 1) >> 20) + " MiB of JSON");
    name = name_and_shape(program_json, shape);
  }
  shape.json_bytes = text;
  shape.dom_bytes = dom;
  Reservation r = reserve(memory_.build_bytes(shape), "reading " + program_words(name, shape));
  auto e = std::make_shared<Entry>();
  e->shape = shape;
  e->bytes = memory_.entry_bytes(shape) + size_t(predictor_.members()) * memo_bytes_;
  e->program_json = program_json;
  e->untransformed_json = untransformed_json;
  e->hash = key_hash(program_json, untransformed_json);
  // The record parse_program reads: the program line as program_annotation, the untransformed
  // schedule as schedule 0.
  data::RawRecord rec;
  rec.file = "query";
  rec.line = 1;
  rec.name_hint = name;
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
  const lcm::model::ScoringModels models = predictor_.scoring();
  if (models.config().encoder.kind == lcm::model::EncoderKind::None) {
    std::lock_guard<std::mutex> lock(model_mu_);
    e->rows = lcm::model::scored_program_rows(models, data::BatchTrees{&e->features.tree},
                                              data::program_batch(e->features, 0, 1), *tape_,
                                              memory_.rows_per_forward());
    trim_tape();
    if (memo_bytes_ > 0 && !sched_weight_.empty()) {
      e->memo.resize(size_t(predictor_.members()));
      for (auto& m : e->memo) m.max_bytes = memo_bytes_;
    }
  }
  // A model relative to the untransformed schedule: each member's output for it, once per
  // program (model::score_batch subtracts it from that member's output for every schedule).
  if (models.relative()) {
    std::lock_guard<std::mutex> lock(model_mu_);
    e->identity_output = lcm::model::untransformed_outputs(
        models, data::BatchTrees{&e->features.tree}, data::identity_batch(e->features, 0), *tape_);
    trim_tape();
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
  stats_.bytes += e->bytes;
  // At most capacity_ programs and cache_capacity_bytes_; the least recently used go first, the
  // new one (and any a request is scoring) stays.
  for (auto it = lru_.end();
       it != lru_.begin() && (lru_.size() > capacity_ || stats_.bytes > cache_capacity_bytes_);) {
    --it;
    if (*it == e) break;
    if (it->use_count() > 1 && lru_.size() <= capacity_) continue;
    it = evict(it);  // queries still scoring it keep their shared_ptr
  }
  return e;
}

int64_t Scorer::max_schedules_per_forward(const std::string& program_json) {
  const std::shared_ptr<Entry> e = program(program_json, "");
  const size_t held = MemoryGate::held_by_this_thread() + e->bytes;
  if (held >= gate_.capacity()) return 0;
  const size_t avail = gate_.capacity() - held;
  const size_t one = memory_.forward_bytes(e->shape, 1), fixed = memory_.forward_bytes(e->shape, 0);
  if (one > avail) return 0;
  return int64_t((avail - fixed) / (one - fixed));
}

std::vector<ScheduleScore> Scorer::score(const std::string& program_json,
                                         const std::string& untransformed_json,
                                         const std::vector<std::string>& schedules) {
  std::vector<ScheduleScore> out = score_uncorrected(program_json, untransformed_json, schedules);
  if (!learns_correction(learning_) || corrections_.programs() == 0) return out;
  const model::Correction c = corrections_.correction(model::program_key(program_json));
  if (c.observations == 0) return out;
  for (ScheduleScore& s : out)
    if (s.ok()) s.speedup = c.apply(s.speedup);
  return out;
}

Observed Scorer::observe(const std::string& program_json, const std::string& untransformed_json,
                         const std::string& schedule_json,
                         const std::vector<double>& execution_times_ms,
                         double untransformed_time_ms) {
  if (execution_times_ms.empty())
    throw QueryError("bad_execution_times", "bad_execution_times: no execution times");
  for (double t : execution_times_ms)
    if (!(t > 0) || !std::isfinite(t))
      throw QueryError("bad_execution_times", "bad_execution_times: an execution time of " +
                                                  std::to_string(t) +
                                                  " ms (each must be positive and finite)");
  if (!std::isnan(untransformed_time_ms) &&
      (!(untransformed_time_ms > 0) || !std::isfinite(untransformed_time_ms)))
    throw QueryError("bad_untransformed_time",
                     "bad_untransformed_time: " + std::to_string(untransformed_time_ms) +
                         " ms (it must be positive and finite)");
  const std::vector<ScheduleScore> s =
      score_uncorrected(program_json, untransformed_json, {schedule_json});
  if (!s[0].ok())
    throw QueryError(s[0].reason, "the observed schedule cannot be scored: " + s[0].reason +
                                      (s[0].detail.empty() ? "" : ": " + s[0].detail));
  const std::string name = program(program_json, untransformed_json)->features.name;
  const std::string key = model::program_key(program_json);
  const double min_time = *std::min_element(execution_times_ms.begin(), execution_times_ms.end());
  Observed r;
  r.untransformed = s[0].untransformed;
  if (r.untransformed) corrections_.set_untransformed_time(key, name, min_time);
  double initial = untransformed_time_ms;
  if (std::isnan(initial)) initial = corrections_.untransformed_time(key);
  if (std::isnan(initial))
    throw QueryError("no_untransformed_time",
                     "no_untransformed_time: the untransformed schedule's time of " + name +
                         " is unknown (give it, or observe the untransformed schedule first)");
  r.measured_speedup = data::speedup_label(initial, min_time);
  if (!(r.measured_speedup > 0) || !std::isfinite(r.measured_speedup))
    throw QueryError("bad_execution_times", "bad_execution_times: the measured speedup " +
                                                std::to_string(initial) + " / " +
                                                std::to_string(min_time) + " is not finite");
  r.predicted_speedup = s[0].speedup;
  if (learns_correction(learning_))
    r.correction = corrections_.observe(key, name, r.predicted_speedup, r.measured_speedup);
  r.corrected_speedup = r.correction.apply(r.predicted_speedup);
  if (learns_finetune(learning_)) {
    queue_finetune(program(program_json, untransformed_json), key, schedule_json,
                   r.measured_speedup);
    if (ft_.synchronous) {
      wait_for_learning();
      r.corrected_speedup = score(program_json, untransformed_json, {schedule_json})[0].speedup;
    }
  }
  return r;
}

bool Scorer::reset_observations(const std::string& program_json) {
  const std::string key = model::program_key(program_json);
  bool had = corrections_.reset(key);
  std::lock_guard<std::mutex> lock(learn_mu_);
  had = learned_.erase(key) > 0 || had;
  return had;
}

void Scorer::reset_observations() {
  corrections_.reset();
  std::lock_guard<std::mutex> lock(learn_mu_);
  learned_.clear();
}

std::shared_ptr<const AdaptedModels> Scorer::adapted_weights(const std::string& key) {
  std::lock_guard<std::mutex> lock(learn_mu_);
  auto it = learned_.find(key);
  if (it == learned_.end()) return nullptr;
  it->second.last_use = ++learn_clock_;
  return it->second.adapted;
}

void Scorer::queue_finetune(const std::shared_ptr<Entry>& e, const std::string& key,
                            const std::string& schedule_json, double measured_speedup) {
  std::vector<std::string> texts;
  std::vector<double> labels;
  Job job;
  {
    std::lock_guard<std::mutex> lock(learn_mu_);
    auto it = learned_.find(key);
    if (it == learned_.end()) {
      // at most ft_.max_programs programs: the least recently used one goes
      while (learned_.size() >= ft_.max_programs) {
        auto lru = learned_.begin();
        for (auto j = learned_.begin(); j != learned_.end(); ++j)
          if (j->second.last_use < lru->second.last_use) lru = j;
        learned_.erase(lru);
      }
      it = learned_.emplace(key, Learned{}).first;
      it->second.serial = next_serial_++;
    }
    Learned& l = it->second;
    l.last_use = ++learn_clock_;
    l.buffer.emplace_back(schedule_json, measured_speedup);
    while (l.buffer.size() > ft_.buffer) l.buffer.pop_front();
    ++l.observations;
    for (const auto& [text, y] : l.buffer) {
      texts.push_back(text);
      labels.push_back(y);
    }
    job.key = key;
    job.serial = l.serial;
    job.observations = l.observations;
  }
  // The buffer as one batch, featurized here (the worker only runs the steps).
  std::vector<ScheduleScore> scores(texts.size());
  std::vector<size_t> scored;
  std::vector<bool> identity;
  job.batch.features = featurize(*e, texts, 0, texts.size(), scores, scored, identity);
  if (scored.empty()) return;
  for (size_t k = 0; k < scored.size(); ++k)
    job.batch.features.speedup[k] = float(labels[scored[k]]);
  job.batch.trees = data::BatchTrees{&e->features.tree};
  if (predictor_.scoring().relative()) job.batch.identity = data::identity_batch(e->features, 0);
  job.entry = e;
  {
    std::lock_guard<std::mutex> lock(learn_mu_);
    if (stop_) return;
    jobs_.push_back(std::move(job));
    ++learn_stats_.queued;
    if (!worker_.joinable()) worker_ = std::thread([this] { worker_loop(); });
  }
  learn_cv_.notify_all();
}

void Scorer::worker_loop() {
  lcm::Tape<float> tape;  // the worker's own: queries never wait for its forwards
  std::vector<lcm::model::CostModel<float>*> original;
  for (int k = 0; k < predictor_.members(); ++k) original.push_back(&predictor_.member(k));
  std::unique_lock<std::mutex> lock(learn_mu_);
  for (;;) {
    learn_cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
    if (stop_) break;
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    busy_ = true;
    const std::function<void()> hook = learn_hook_;
    std::shared_ptr<const AdaptedModels> start;
    if (auto it = learned_.find(job.key); it != learned_.end() && it->second.serial == job.serial)
      start = it->second.adapted;
    lock.unlock();
    std::shared_ptr<AdaptedModels> result;
    bool failed = false;
    try {
      result = finetune(original, start.get(), &predictor_.scaling(), predictor_.config(),
                        std::move(job.batch), ft_, tape);
      result->observations = job.observations;
    } catch (const std::exception&) {
      failed = true;
    }
    if (hook) hook();
    lock.lock();
    if (failed) {
      ++learn_stats_.failed;
    } else if (auto it = learned_.find(job.key);
               it != learned_.end() && it->second.serial == job.serial) {
      it->second.adapted = std::move(result);
      ++learn_stats_.completed;
    } else {
      ++learn_stats_.discarded;
    }
    busy_ = false;
    idle_cv_.notify_all();
  }
  busy_ = false;
  idle_cv_.notify_all();
}

void Scorer::wait_for_learning() {
  std::unique_lock<std::mutex> lock(learn_mu_);
  idle_cv_.wait(lock, [this] { return stop_ || (jobs_.empty() && !busy_); });
}

LearningStats Scorer::learning_stats() const {
  std::lock_guard<std::mutex> lock(learn_mu_);
  LearningStats s = learn_stats_;
  s.programs = int64_t(learned_.size());
  s.adapted = 0;
  for (const auto& [k, l] : learned_) s.adapted += l.adapted ? 1 : 0;
  return s;
}

void Scorer::set_learning_hook_for_test(std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(learn_mu_);
  learn_hook_ = std::move(hook);
}

std::string Scorer::adaptation_json() const {
  rapidjson::Document d;
  const std::string corrections = corrections_.to_json(model_id_);
  d.Parse<rapidjson::kParseFullPrecisionFlag | rapidjson::kParseIterativeFlag>(corrections.data(),
                                                                               corrections.size());
  auto& a = d.GetAllocator();
  d.AddMember("learning", rapidjson::Value(learning_name(learning_), a), a);
  // Each adapted program: its replay buffer and, per member, the parameters whose values differ
  // from the checkpoint's (the head only when only the head is trained), float32 in base64.
  rapidjson::Value programs(rapidjson::kArrayType);
  {
    std::lock_guard<std::mutex> lock(learn_mu_);
    for (const auto& [key, l] : learned_) {
      rapidjson::Value p(rapidjson::kObjectType);
      p.AddMember("key", rapidjson::Value(key.c_str(), a), a);
      p.AddMember("observations", l.observations, a);
      rapidjson::Value buffer(rapidjson::kArrayType);
      for (const auto& [text, y] : l.buffer) {
        rapidjson::Value o(rapidjson::kArrayType);
        o.PushBack(rapidjson::Value(text.c_str(), rapidjson::SizeType(text.size()), a), a);
        o.PushBack(y, a);
        buffer.PushBack(o, a);
      }
      p.AddMember("buffer", buffer, a);
      rapidjson::Value members(rapidjson::kArrayType);
      if (l.adapted) {
        p.AddMember("adapted_observations", l.adapted->observations, a);
        for (size_t k = 0; k < l.adapted->members.size(); ++k) {
          rapidjson::Value weights(rapidjson::kObjectType);
          const auto& orig = predictor_.member(int(k)).params();
          for (const auto& t : l.adapted->members[k]->params().all()) {
            const auto* o = orig.find(t.name);
            if (o && o->value == t.value) continue;
            weights.AddMember(rapidjson::Value(t.name.c_str(), a),
                              rapidjson::Value(floats_base64(t.value).c_str(), a), a);
          }
          members.PushBack(weights, a);
        }
      }
      p.AddMember("weights", members, a);
      programs.PushBack(p, a);
    }
  }
  d.AddMember("finetuned", programs, a);
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  d.Accept(w);
  return std::string(sb.GetString(), sb.GetSize());
}

void Scorer::load_adaptation_json(const std::string& text) {
  // Everything is read and checked before the state is replaced.
  std::map<std::string, Learned> loaded;
  try {
    model::ProgramCorrections check;
    check.from_json(text, model_id_);
    rapidjson::Document d;
    d.Parse<rapidjson::kParseFullPrecisionFlag | rapidjson::kParseIterativeFlag>(text.data(),
                                                                                 text.size());
    const auto ft = d.FindMember("finetuned");
    if (ft != d.MemberEnd()) {
      if (!ft->value.IsArray()) throw std::invalid_argument("\"finetuned\" is not an array");
      for (const auto& p : ft->value.GetArray()) {
        if (!p.IsObject() || !p.HasMember("key") || !p["key"].IsString() ||
            !p.HasMember("buffer") || !p["buffer"].IsArray() || !p.HasMember("weights") ||
            !p["weights"].IsArray() || !p.HasMember("observations") || !p["observations"].IsInt64())
          throw std::invalid_argument(
              "a fine-tuned program without key, observations, buffer "
              "or weights");
        Learned l;
        l.observations = p["observations"].GetInt64();
        for (const auto& o : p["buffer"].GetArray()) {
          if (!o.IsArray() || o.Size() != 2 || !o[0].IsString() || !o[1].IsNumber() ||
              !(o[1].GetDouble() > 0) || !std::isfinite(o[1].GetDouble()))
            throw std::invalid_argument("a buffer entry that is not [schedule, speedup > 0]");
          l.buffer.emplace_back(o[0].GetString(), o[1].GetDouble());
        }
        while (l.buffer.size() > ft_.buffer) l.buffer.pop_front();
        const auto& members = p["weights"].GetArray();
        if (!members.Empty()) {
          if (int(members.Size()) != predictor_.members())
            throw std::invalid_argument("fine-tuned weights of " + std::to_string(members.Size()) +
                                        " members, the model has " +
                                        std::to_string(predictor_.members()));
          auto adapted = std::make_shared<AdaptedModels>();
          adapted->observations =
              p.HasMember("adapted_observations") && p["adapted_observations"].IsInt64()
                  ? p["adapted_observations"].GetInt64()
                  : l.observations;
          for (rapidjson::SizeType k = 0; k < members.Size(); ++k) {
            if (!members[k].IsObject()) throw std::invalid_argument("a member is not an object");
            auto m = copy_weights(predictor_.member(int(k)));
            for (const auto& w : members[k].GetObject()) {
              Parameter<float>* t = m->params().find(w.name.GetString());
              if (!t || !w.value.IsString() || !base64_floats(w.value.GetString(), t->value))
                throw std::invalid_argument(std::string("fine-tuned weights '") +
                                            w.name.GetString() +
                                            "': no such parameter, or not its size in finite "
                                            "float32 base64");
            }
            adapted->members.push_back(std::move(m));
          }
          l.adapted = std::move(adapted);
        }
        loaded[p["key"].GetString()] = std::move(l);
        if (loaded.size() > ft_.max_programs)
          throw std::invalid_argument("more fine-tuned programs than finetune programs=" +
                                      std::to_string(ft_.max_programs));
      }
    }
    corrections_.from_json(text, model_id_);
  } catch (const std::invalid_argument& e) {
    throw QueryError("bad_adaptation", std::string("bad_adaptation: ") + e.what());
  }
  std::lock_guard<std::mutex> lock(learn_mu_);
  for (auto& [key, l] : loaded) {
    l.serial = next_serial_++;
    l.last_use = ++learn_clock_;
  }
  learned_ = std::move(loaded);
}

void Scorer::save_adaptation(const std::string& path) const {
  lcm::atomic_write_file(path, adaptation_json() + "\n");
}

void Scorer::load_adaptation(const std::string& path) {
  std::string text;
  try {
    text = lcm::read_file(path);
  } catch (const std::exception& e) {
    throw QueryError("bad_adaptation", std::string("bad_adaptation: ") + e.what());
  }
  try {
    load_adaptation_json(text);
  } catch (const QueryError& e) {
    throw QueryError("bad_adaptation", path + ": " + e.what());
  }
}

std::vector<ScheduleScore> Scorer::score_group(const std::string& program_json,
                                               const std::string& untransformed_json,
                                               const std::vector<std::string>& schedules) {
  if (schedules.size() <= 1) return score(program_json, untransformed_json, schedules);
  // the most schedules per forward whose answers are each their own forward's
  size_t per = 1;
  {
    const std::shared_ptr<Entry> e = program(program_json, untransformed_json);
    const lcm::model::CostModel<float>& m = predictor_.model();
    if (tape_->device() == lcm::Device::CPU && e->features.n_comps > 0)
      for (size_t b = std::min<size_t>(schedules.size(), 8); b > 1; --b)
        if (m.memo_matches_forward(e->features.tree, e->features.n_comps, int64_t(b))) {
          per = b;
          break;
        }
  }
  std::vector<ScheduleScore> out;
  out.reserve(schedules.size());
  for (size_t begin = 0; begin < schedules.size(); begin += per) {
    const size_t end = std::min(schedules.size(), begin + per);
    const std::vector<std::string> part(schedules.begin() + long(begin),
                                        schedules.begin() + long(end));
    for (ScheduleScore& s : score(program_json, untransformed_json, part))
      out.push_back(std::move(s));
  }
  return out;
}

std::vector<ScheduleScore> Scorer::score_uncorrected(const std::string& program_json,
                                                     const std::string& untransformed_json,
                                                     const std::vector<std::string>& schedules) {
  std::vector<ScheduleScore> out(schedules.size());
  if (schedules.empty()) return out;
  std::shared_ptr<Entry> e = program(program_json, untransformed_json);
  const std::shared_ptr<const AdaptedModels> adapted =
      learns_finetune(learning_) ? adapted_weights(model::program_key(program_json)) : nullptr;
  // The most schedules one forward may take beside the program (held in the cache) and what
  // this request holds already.
  const size_t held = MemoryGate::held_by_this_thread() + e->bytes;
  const size_t avail = gate_.capacity() - std::min(held, gate_.capacity());
  const size_t one = memory_.forward_bytes(e->shape, 1), fixed = memory_.forward_bytes(e->shape, 0);
  if (one > avail) {
    {
      std::lock_guard<std::mutex> lock(cache_mu_);
      ++stats_.refused;
    }
    throw QueryError("request_too_large",
                     request_too_large_message(
                         "one schedule's forward of " + program_words(e->features.name, e->shape) +
                             " beside the program's " + std::to_string(e->bytes >> 20) + " MiB",
                         one, avail, gate_.bound()));
  }
  const size_t chunk = std::min(schedules.size(), (avail - fixed) / (one - fixed));
  if (chunk < schedules.size()) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    ++stats_.chunked;
  }
  size_t largest = 0;
  for (size_t begin = 0; begin < schedules.size(); begin += chunk) {
    const size_t end = std::min(schedules.size(), begin + chunk);
    const size_t need = memory_.forward_bytes(e->shape, int64_t(end - begin));
    largest = std::max(largest, need);
    gate_.acquire(
        need, [this] { return cached_bytes(); }, [this] { return evict_one(); });
    Reservation r(&gate_, need);
    score_chunk(*e, schedules, begin, end, out, adapted.get());
  }
#if defined(__GLIBC__)
  // the freed batch and feature vectors of a large request back to the system, not kept by malloc
  if (largest > kArenaKeepBytes) malloc_trim(0);
#endif
  return out;
}

data::BatchTensors Scorer::featurize(Entry& en, const std::vector<std::string>& schedules,
                                     size_t begin, size_t end, std::vector<ScheduleScore>& out,
                                     std::vector<size_t>& scored,
                                     std::vector<bool>& identity_query) {
  Entry* e = &en;
  data::BatchTensors bt;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    data::ProgramFeatures& q = e->query;
    q.descriptor_bytes.clear();
    q.descriptor_end.clear();
    q.schedule_index.clear();
    for (size_t i = begin; i < end; ++i) {
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
  return bt;
}

void Scorer::score_chunk(Entry& en, const std::vector<std::string>& schedules, size_t begin,
                         size_t end, std::vector<ScheduleScore>& out,
                         const AdaptedModels* adapted) {
  Entry* e = &en;
  // Features of the schedules that can be scored, as one batch of one program.
  std::vector<size_t> scored;        // indices into `schedules`
  std::vector<bool> identity_query;  // [scored]: the schedule is the untransformed one
  data::BatchTensors bt = featurize(en, schedules, begin, end, out, scored, identity_query);
  if (scored.empty()) return;

  // One batch of the program's scored schedules through model::score_batch, the path of every
  // tool (scaling, each member's forward over the cached rows, relative to the untransformed
  // schedule, ensemble mean, calibration map, positive speedup).
  lcm::model::ScoringBatch batch;
  batch.trees = data::BatchTrees{&e->features.tree};
  batch.features = std::move(bt);
  if (!e->rows.empty()) batch.program_rows = &e->rows;
  if (!sched_weight_.empty()) batch.schedule_weight = &sched_weight_;
  batch.untransformed = std::move(identity_query);
  if (!e->identity_output.empty()) batch.untransformed_output = &e->identity_output;
  for (auto& m : e->memo) batch.memos.push_back(&m);
  lcm::model::ScoringModels models = predictor_.scoring();
  if (adapted) {
    // The program's fine-tuned weights: the whole forward (the cached rows, the first layer's
    // schedule columns and the untransformed schedule's outputs are the checkpoint's).
    models.members.clear();
    for (const auto& m : adapted->members) models.members.push_back(m.get());
    batch.program_rows = nullptr;
    batch.schedule_weight = nullptr;
    batch.untransformed_output = nullptr;
    batch.memos.clear();  // the memo holds the checkpoint's results
    if (models.relative()) {
      batch.untransformed_trees = batch.trees;
      batch.untransformed_features = data::identity_batch(e->features, 0);
    }
  }
  std::vector<lcm::model::ScoredDatapoint> s;
  {
    std::lock_guard<std::mutex> lock(model_mu_);
    s = lcm::model::score_batch(models, batch, *tape_);
    trim_tape();
  }
  for (size_t k = 0; k < scored.size(); ++k) {
    const double v = s[k].speedup;
    if (!std::isfinite(v))
      throw std::runtime_error("the model predicted a non-finite speedup for schedule " +
                               std::to_string(scored[k]) + " of " + e->features.name +
                               " (broken weights in " + predictor_.weights_path() + "?)");
    out[scored[k]].speedup = v;
    out[scored[k]].untransformed = k < batch.untransformed.size() && batch.untransformed[k];
  }
}

}  // namespace lcm::serve
