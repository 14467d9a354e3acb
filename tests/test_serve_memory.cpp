// lcm-serve's and liblcm's memory bound over generated requests of many sizes: programs made of
// 1 to 100 copies of a real (or committed synthetic) program's loop nests side by side, with 1 to
// 100 schedules. The estimate bounds the engine arena's measured peak; a request split into
// forwards that fit answers exactly as one forward; a request that cannot fit is refused as
// request_too_large with its reason and the scorer answers the next one; the program cache stays
// within its bytes.
#include <doctest/doctest.h>
#include <rapidjson/document.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "lcm/lcm.hpp"
#include "serve/protocol.hpp"
#include "serve/request_memory.hpp"
#include "serve/scorer.hpp"
#include "support/gz_support.hpp"
#include "support/serve_queries.hpp"
#include "support/test_support.hpp"

using namespace lcm;

namespace {

/// A program of `copies` copies of `base`'s computations and loops (names prefixed "r<k>_",
/// buffers renumbered), its untransformed schedule and `n_schedules` schedules: schedule s gives
/// copy k the base's schedule (s + k) mod n, so the copies differ.
struct BigProgram {
  std::string program, untransformed;
  std::vector<std::string> schedules;
  serve::ProgramShape shape;
};

std::string renamed(const std::string& json, int k) {
  static const std::regex names("\\b(i[0-9]+|comp[0-9]+)\\b");
  return std::regex_replace(json, names, "r" + std::to_string(k) + "_$1");
}

void merge_members(rapidjson::Value& into, rapidjson::Value& from,
                   rapidjson::Document::AllocatorType& a) {
  for (auto& m : from.GetObject()) into.AddMember(m.name, m.value, a);
}

BigProgram big_program(const test::QueryProgram& base, int copies, int n_schedules) {
  rapidjson::Document prog(rapidjson::kObjectType);
  auto& a = prog.GetAllocator();
  prog.AddMember("function_name", rapidjson::Value(("big" + std::to_string(copies)).c_str(), a), a);
  rapidjson::Value its(rapidjson::kObjectType), comps(rapidjson::kObjectType);
  int n_comps = 0, n_buffers = 0;
  {
    rapidjson::Document d;
    d.Parse(base.program.c_str());
    for (auto& c : d["computations"].GetObject()) {
      ++n_comps;
      n_buffers = std::max(n_buffers, c.value["write_buffer_id"].GetInt() + 1);
      for (auto& x : c.value["accesses"].GetArray())
        n_buffers = std::max(n_buffers, x["buffer_id"].GetInt() + 1);
    }
  }
  for (int k = 0; k < copies; ++k) {
    rapidjson::Document d(&a);
    const std::string t = renamed(base.program, k);
    d.Parse(t.c_str());
    REQUIRE(!d.HasParseError());
    for (auto& c : d["computations"].GetObject()) {
      c.value["absolute_order"].SetInt(c.value["absolute_order"].GetInt() + k * n_comps);
      c.value["write_buffer_id"].SetInt(c.value["write_buffer_id"].GetInt() + k * n_buffers);
      for (auto& x : c.value["accesses"].GetArray())
        x["buffer_id"].SetInt(x["buffer_id"].GetInt() + k * n_buffers);
    }
    merge_members(its, d["iterators"], a);
    merge_members(comps, d["computations"], a);
  }
  prog.AddMember("memory_size", 0, a);
  prog.AddMember("iterators", its, a);
  prog.AddMember("computations", comps, a);
  BigProgram out;
  out.program = test::json_text(prog);
  out.shape = serve::program_shape(prog, out.program.size());
  auto schedule = [&](int s) {
    rapidjson::Document r(rapidjson::kObjectType);
    auto& ra = r.GetAllocator();
    rapidjson::Value fusions(rapidjson::kArrayType), roots(rapidjson::kArrayType);
    for (int k = 0; k < copies; ++k) {
      rapidjson::Document d(&ra);
      const size_t i = size_t(s + k) % base.schedules.size();
      const std::string t = renamed(s < 0 ? base.untransformed : base.schedules[i], k);
      d.Parse(t.c_str());
      REQUIRE(!d.HasParseError());
      for (auto& m : d.GetObject()) {
        const std::string name = m.name.GetString();
        if (name.rfind("r", 0) == 0) r.AddMember(m.name, m.value, ra);
      }
      if (d.HasMember("fusions") && d["fusions"].IsArray())
        for (auto& f : d["fusions"].GetArray()) fusions.PushBack(f, ra);
      for (auto& x : d["tree_structure"]["roots"].GetArray()) roots.PushBack(x, ra);
    }
    r.AddMember("fusions", fusions, ra);
    rapidjson::Value tree(rapidjson::kObjectType);
    tree.AddMember("roots", roots, ra);
    r.AddMember("tree_structure", tree, ra);
    return test::json_text(r);
  };
  out.untransformed = schedule(-1);
  for (int s = 0; s < n_schedules; ++s) out.schedules.push_back(schedule(s));
  out.shape.json_bytes = out.program.size() + out.untransformed.size();
  out.shape.dom_bytes = serve::RequestMemory::json_bytes(out.program) +
                        serve::RequestMemory::json_bytes(out.untransformed);
  return out;
}

struct Fixture {
  std::string dir, ckpt;
  test::QueryProgram base;
};

const Fixture& fixture() {
  static Fixture f = [] {
    Fixture x;
    x.dir = test::temp_dir("serve_memory");
    x.ckpt = x.dir + "/model.safetensors";
    test::write_random_checkpoint(x.ckpt);
    std::string src = test::shared_data("looperset-sample/valid.jsonl.gz");
    if (src.empty()) src = test::committed_data("synth_valid.jsonl.gz");
    const std::vector<std::string> lines = test::gz_lines(src);
    REQUIRE(!lines.empty());
    // the first program with a few computations and several schedules
    for (const std::string& l : lines) {
      x.base = test::query_program(l);
      if (x.base.n_comps >= 2 && x.base.schedules.size() >= 4) break;
    }
    return x;
  }();
  return f;
}

config::Config scorer_config() {
  config::Config c;
  config::apply_overrides(c, {"eval.weights_path=" + fixture().ckpt, "training.threads=1"});
  return c;
}

std::unique_ptr<serve::Scorer> make_scorer(size_t bound_mib, size_t cache_entries = 64,
                                           size_t memo_bytes = serve::kDefaultMemoBytes) {
  serve::ScorerOptions o;
  o.cache_entries = cache_entries;
  o.max_request_bytes = bound_mib << 20;
  o.memo_bytes = memo_bytes;
  return std::make_unique<serve::Scorer>(scorer_config(), o);
}

bool sanitized() {
  return std::getenv("LCM_SANITIZED") != nullptr;
}

}  // namespace

TEST_CASE("the request memory estimate bounds the arena's measured peak, programs of many sizes") {
  const std::vector<int> copies =
      sanitized() ? std::vector<int>{1, 8} : std::vector<int>{1, 2, 5, 13, 40, 100};
  const std::vector<int> batches =
      sanitized() ? std::vector<int>{1, 9} : std::vector<int>{1, 9, 40};
  for (int k : copies) {
    const BigProgram p = big_program(fixture().base, k, batches.back());
    // the per-program part: a fresh scorer's arena after the program's build
    auto s = make_scorer(8192);
    const serve::RequestMemory& m = s->memory_model();
    REQUIRE(s->max_schedules_per_forward(p.program) > 0);
    const size_t build_peak = s->arena_peak_bytes();
    CHECK_MESSAGE(build_peak <= m.build_bytes(p.shape),
                  p.shape.comps << " computations: build arena peak " << build_peak
                                << " > estimate " << m.build_bytes(p.shape));
    for (int b : batches) {
      // without the memo: the whole forward, which the estimate bounds closely
      auto t = make_scorer(8192, 64, 0);
      const std::vector<std::string> sch(p.schedules.begin(), p.schedules.begin() + b);
      // build on one schedule, then measure a fresh arena's peak for the forward of b
      (void)t->score(p.program, p.untransformed, {sch[0]});
      t->release_arena();
      const std::vector<serve::ScheduleScore> r = t->score(p.program, p.untransformed, sch);
      int scored = 0;
      for (const auto& x : r) scored += x.ok() ? 1 : 0;
      CHECK(scored > 0);
      const size_t peak = t->arena_peak_bytes();
      MESSAGE(p.shape.comps << " comps, " << p.shape.loops << " loops, " << b
                            << " schedules: forward arena peak " << peak << " B, estimate "
                            << m.forward_bytes(p.shape, b) << " B; build peak " << build_peak
                            << " B, estimate " << m.build_bytes(p.shape) << " B");
      CHECK_MESSAGE(peak <= m.forward_bytes(p.shape, b),
                    p.shape.comps << " computations, " << b << " schedules: forward arena peak "
                                  << peak << " > estimate " << m.forward_bytes(p.shape, b));
      // the estimate is an upper bound, not a wild one
      CHECK(m.forward_bytes(p.shape, b) < 8 * peak + (size_t(2) << 20));
      // with the memo (a forward of one schedule computes what its memo lacks): within it too
      auto u = make_scorer(8192);
      (void)u->score(p.program, p.untransformed, {p.untransformed});
      u->release_arena();
      (void)u->score(p.program, p.untransformed, sch);
      CHECK_MESSAGE(u->arena_peak_bytes() <= m.forward_bytes(p.shape, b),
                    p.shape.comps << " computations, " << b << " schedules, memo: forward arena "
                                  << "peak " << u->arena_peak_bytes() << " > estimate "
                                  << m.forward_bytes(p.shape, b));
    }
  }
}

TEST_CASE("a request split into forwards that fit answers as one forward (≤ 1e-6 relative)") {
  auto big = make_scorer(8192);
  auto small = make_scorer(192);  // ~80 MiB beside the model and the process
  // Under the sanitizers one program of 16 copies: with the 192 MiB bound a forward takes about
  // 14 of its schedules, so a request of n = 16 splits.
  const std::vector<int> copies =
      sanitized() ? std::vector<int>{16} : std::vector<int>{1, 4, 16, 40};
  const int n = sanitized() ? 16 : 60;
  int64_t split_requests = 0, identical = 0, compared = 0;
  double max_diff = 0;
  for (int k : copies) {
    const BigProgram p = big_program(fixture().base, k, n);
    const int64_t per_forward = small->max_schedules_per_forward(p.program);
    REQUIRE(per_forward >= 1);
    // the request one schedule past a forward's limit splits whenever the program allows one
    std::vector<int> sizes = {1, 7, n};
    if (per_forward + 1 < n) sizes.push_back(int(per_forward + 1));
    for (int b : sizes) {
      const std::vector<std::string> sch(p.schedules.begin(), p.schedules.begin() + b);
      const std::vector<serve::ScheduleScore> want = big->score(p.program, p.untransformed, sch);
      const int64_t chunked0 = small->cache_stats().chunked;
      const std::vector<serve::ScheduleScore> got = small->score(p.program, p.untransformed, sch);
      REQUIRE(got.size() == want.size());
      if (b > per_forward) {
        CHECK(small->cache_stats().chunked == chunked0 + 1);
        ++split_requests;
      }
      for (size_t i = 0; i < got.size(); ++i) {
        CHECK(got[i].reason == want[i].reason);
        // the same up to the float rounding of the batch products: the GEMM's blocking depends
        // on the batch's row count, the math of a schedule's row does not
        const double d = std::fabs(got[i].speedup - want[i].speedup) /
                         std::max(std::fabs(want[i].speedup), 1e-30);
        max_diff = std::max(max_diff, d);
        identical += got[i].speedup == want[i].speedup ? 1 : 0;
        ++compared;
        CHECK_MESSAGE(d <= 1e-6, p.shape.comps << " comps, " << b << " schedules in forwards of "
                                               << per_forward << ": schedule " << i);
      }
    }
  }
  CHECK(split_requests > 0);  // the bound did split requests
  MESSAGE(identical << " of " << compared << " answers bit-identical; largest relative difference "
                    << max_diff);
}

TEST_CASE("a request that cannot fit is refused as request_too_large and the scorer goes on") {
  auto small = make_scorer(192);
  const BigProgram ok = big_program(fixture().base, 1, 3);
  const std::vector<serve::ScheduleScore> want =
      small->score(ok.program, ok.untransformed, ok.schedules);
  // programs of growing size until one is refused: the estimate grows with the computations
  bool refused = false;
  for (int k = 8; k <= 4096 && !refused; k *= 2) {
    const BigProgram p = big_program(fixture().base, k, 1);
    try {
      (void)small->score(p.program, p.untransformed, p.schedules);
    } catch (const serve::QueryError& e) {
      refused = true;
      CHECK(e.reason == "request_too_large");
      const std::string w = e.what();
      CHECK(w.find("request_too_large: ") == 0);
      CHECK(w.find("--max-request-memory") != std::string::npos);
      CHECK(w.find("MiB") != std::string::npos);
      CHECK(small->cache_stats().refused >= 1);
    }
    // the scorer answers the next request as before
    const std::vector<serve::ScheduleScore> again =
        small->score(ok.program, ok.untransformed, ok.schedules);
    REQUIRE(again.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) CHECK(again[i].speedup == want[i].speedup);
  }
  CHECK(refused);
  CHECK(serve::MemoryGate::held_by_this_thread() == 0);  // every reservation given back

  // through the jsonl protocol: the error object with the reason, then the next answer
  const BigProgram huge = big_program(fixture().base, 2048, 1);
  std::string line = "{\"program\":" + huge.program + ",\"untransformed\":" + huge.untransformed +
                     ",\"schedules\":[" + huge.schedules[0] + "]}";
  int64_t n = 0;
  bool had_error = false;
  std::string error;
  const std::string a = serve::answer_jsonl(*small, line, n, had_error, error);
  CHECK(had_error);
  CHECK(a.find("{\"error\":\"request_too_large: ") == 0);
  line = "{\"program\":" + ok.program + ",\"untransformed\":" + ok.untransformed +
         ",\"schedules\":[" + ok.schedules[0] + "]}";
  error.clear();
  const std::string b = serve::answer_jsonl(*small, line, n, had_error, error);
  CHECK(b.find("{\"speedups\":[") == 0);
  CHECK(serve::MemoryGate::held_by_this_thread() == 0);
}

TEST_CASE("liblcm: max_request_memory_mib bounds a call; request_too_large is its Error reason") {
  lcm::PredictorOptions o;
  o.weights_path = fixture().ckpt;
  o.max_request_memory_mib = 192;
  lcm::Predictor p(o);
  const BigProgram huge = big_program(fixture().base, 2048, 1);
  try {
    (void)p.predict(huge.program, huge.schedules, huge.untransformed);
    FAIL("a program far above the bound was scored");
  } catch (const lcm::Error& e) {
    CHECK(e.reason() == "request_too_large");
  }
  const BigProgram ok = big_program(fixture().base, 2, 40);
  const std::vector<double> v = p.predict(ok.program, ok.schedules, ok.untransformed);
  lcm::PredictorOptions wide = o;
  wide.max_request_memory_mib = 8192;
  const std::vector<double> w =
      lcm::Predictor(wide).predict(ok.program, ok.schedules, ok.untransformed);
  CHECK(v == w);
  o.max_request_memory_mib = 64;  // below the smallest bound
  try {
    lcm::Predictor q(o);
    FAIL("a bound below 128 MiB was accepted");
  } catch (const lcm::Error& e) {
    CHECK(e.reason() == "config");
  }
}

TEST_CASE("the program cache stays within its bytes, whatever its entry count") {
  auto small = make_scorer(192, 1000);
  const size_t cap = small->cache_stats().capacity_bytes;
  CHECK(cap > 0);
  const int programs = sanitized() ? 6 : 12;
  const int copies = 320 / std::max(fixture().base.n_comps, 1);  // ~320 computations each
  for (int i = 0; i < programs; ++i) {
    // distinct programs (distinct names)
    BigProgram p = big_program(fixture().base, copies, 1);
    const std::string name = "big" + std::to_string(copies);
    p.program.insert(p.program.find(name) + name.size(), "_" + std::to_string(i));
    (void)small->score(p.program, p.untransformed, p.schedules);
    const serve::CacheStats cs = small->cache_stats();
    CHECK(cs.bytes <= cap);
    CHECK(cs.entries >= 1);
  }
  const serve::CacheStats cs = small->cache_stats();
  CHECK(cs.evictions > 0);  // by bytes: far fewer than the 1000 entries allowed
  CHECK(cs.entries < programs);
}
