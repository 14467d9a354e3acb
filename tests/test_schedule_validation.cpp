// Schedules that cannot be applied to their program are never scored (docs/data-format.md § Skips,
// "Applicability"): every schedule of the real sample (else of the committed synthetic slice) is
// accepted by validate_schedule, and each of its mutants in each invalid way is refused with the
// named reason, by validate_schedule, by featurize (the readers) and, written in each schedule
// dialect that can say it, by parse_schedule_json + validate_schedule (lcm-serve and liblcm). The
// serve-level refusals (an annotation as the candidate, a jsonl request with a key twice, a
// transformed untransformed schedule) and the one-schedule-per-line rules are checked here too.
#include <doctest/doctest.h>
#include <rapidjson/document.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "data/features.hpp"
#include "data/reader.hpp"
#include "data/schedule_validation.hpp"
#include "data/skips.hpp"
#include "data/transformations.hpp"
#include "serve/protocol.hpp"
#include "serve/scorer.hpp"
#include "support/gz_support.hpp"
#include "support/serve_queries.hpp"
#include "support/test_support.hpp"

using namespace lcm::data;

namespace {

/// The real sample when ../shared is there, else the committed synthetic slice.
std::string sample_path() {
  const std::string real = lcm::test::shared_data("looperset-sample/mini.jsonl.gz");
  return real.empty() ? lcm::test::committed_data("synth_train.jsonl.gz") : real;
}

/// One program of the sample with its record's text.
struct Sample {
  Program program;
  std::string json;
};

const std::vector<Sample>& samples() {
  static const std::vector<Sample> all = [] {
    std::vector<Sample> out;
    SkipLog log(false, 0);
    RecordSource src(sample_path(), log);
    RawRecord rec;
    while (src.next(rec)) {
      SkipLog plog(false, 0);
      std::optional<Program> p = parse_program(rec, plog);
      if (p) out.push_back({std::move(*p), rec.json});
    }
    return out;
  }();
  return all;
}

/// One invalid way: its reason, and the mutant of schedule `s` of `p` (false when the way does
/// not apply to this program, e.g. a skewing of a program without a 2-deep nest).
struct Mutation {
  const char* name;
  const char* reason;
  std::function<bool(const Program&, Schedule&)> apply;
};

/// A computation with at least `depth` loops, or -1.
int comp_of_depth(const Program& p, size_t depth) {
  for (size_t c = 0; c < p.computations.size(); ++c)
    if (p.computations[c].iterators.size() >= depth) return int(c);
  return -1;
}

/// The tag vector of a `k` transformation of `levels` and `params` (transformations.hpp).
TagVector tag_of(TransformKind k, std::vector<int64_t> levels, std::vector<int64_t> params = {}) {
  Transformation t;
  t.kind = k;
  t.n_levels = int(levels.size());
  std::copy(levels.begin(), levels.end(), t.levels.begin());
  t.n_params = int(params.size());
  std::copy(params.begin(), params.end(), t.params.begin());
  return encode(t);
}

TagVector skew(int64_t i, int64_t j, std::vector<int64_t> f) {
  return tag_of(TransformKind::Skewing, {i, j}, std::move(f));
}

/// The Mutation that adds a skewing of levels 0 and 1 with `factors` to a computation with a
/// 2-deep nest (not applicable without one, or when that leaves more than 4 transformations).
std::function<bool(const Program&, Schedule&)> skew_levels_0_1(std::vector<int64_t> factors) {
  return [factors](const Program& p, Schedule& s) {
    const int c = comp_of_depth(p, 2);
    if (c < 0) return false;
    s.comps[size_t(c)].transformations.push_back(skew(0, 1, factors));
    return s.comps[size_t(c)].transformations.size() <= 4;
  };
}

const std::vector<Mutation>& mutations() {
  static const std::vector<Mutation> all = {
      {"the same loop tiled twice in one tiling", "loop_tiled_twice",
       [](const Program& p, Schedule& s) {
         const int c = comp_of_depth(p, 1);
         if (c < 0) return false;
         CompSchedule& cs = s.comps[size_t(c)];
         const std::string& it = p.computations[size_t(c)].iterators[0];
         cs.tiling_dims = {it, it};
         cs.tiling_factors = {32, 32};
         return true;
       }},
      {"a loop of a tiling repeated (the schedule's own tiling kept)", "loop_tiled_twice",
       [](const Program&, Schedule& s) {
         for (CompSchedule& cs : s.comps)
           if (!cs.tiling_dims.empty() && cs.tiling_dims.size() < 3) {
             cs.tiling_dims.push_back(cs.tiling_dims[0]);
             cs.tiling_factors.push_back(cs.tiling_factors[0]);
             return true;
           }
         return false;
       }},
      {"a fusion of a computation with itself", "bad_fusion",
       [](const Program& p, Schedule& s) {
         s.fusions.push_back({p.computations[0].name, p.computations[0].name, 0});
         return true;
       }},
      {"a fusion naming a computation the program lacks", "bad_fusion",
       [](const Program& p, Schedule& s) {
         s.fusions.push_back({p.computations[0].name, "no_such_computation", 0});
         return true;
       }},
      {"a fusion below the nests", "bad_fusion",
       [](const Program& p, Schedule& s) {
         if (p.computations.size() < 2) return false;
         s.fusions.push_back({p.computations[0].name, p.computations[1].name, 64});
         return true;
       }},
      {"an unrolling factor of 2^40", "bad_unroll_factor",
       [](const Program&, Schedule& s) {
         s.comps[0].unrolling_factor = int64_t(1) << 40;
         return true;
       }},
      {"a tiling factor of 2^40", "bad_tile_factor",
       [](const Program& p, Schedule& s) {
         const int c = comp_of_depth(p, 1);
         if (c < 0) return false;
         CompSchedule& cs = s.comps[size_t(c)];
         cs.tiling_dims = {p.computations[size_t(c)].iterators[0]};
         cs.tiling_factors = {int64_t(1) << 40};
         return true;
       }},
      {"a skewing of levels [0, 0]", "bad_transformation",
       [](const Program&, Schedule& s) {
         s.comps[0].transformations.push_back(skew(0, 0, {1, 1, 1, 1}));
         return s.comps[0].transformations.size() <= 4;
       }},
      {"a skewing whose factors are singular", "singular_transformation",
       skew_levels_0_1({1, 1, 1, 1})},
      {"a skewing of determinant 2", "non_unimodular_transformation",
       skew_levels_0_1({2, 0, 0, 1})},
      {"an interchange beyond the nest", "bad_transformation",
       [](const Program& p, Schedule& s) {
         s.comps[0].transformations.push_back(
             tag_of(TransformKind::Interchange, {0, int64_t(p.computations[0].iterators.size())}));
         return s.comps[0].transformations.size() <= 4;
       }},
      {"a transformation of unknown type", "bad_transformation",
       [](const Program&, Schedule& s) {
         TagVector t{};
         t[0] = 7;  // no kind has code 7
         REQUIRE_FALSE(kind_of_tag(t[0]));
         s.comps[0].transformations.push_back(t);
         return s.comps[0].transformations.size() <= 4;
       }},
      {"five transformations", "transformations_gt_4",
       [](const Program&, Schedule& s) {
         s.comps[0].transformations.assign(5, tag_of(TransformKind::Reversal, {0}));
         return true;
       }},
      {"a parallelised loop that is no loop of the program", "unknown_loop_name",
       [](const Program&, Schedule& s) {
         s.comps[0].parallelized_dim = "no_such_loop";
         return true;
       }},
      {"a parallelised loop outside the computation's nest", "loop_not_in_nest",
       [](const Program& p, Schedule& s) {
         std::set<std::string> near(p.computations[0].iterators.begin(),
                                    p.computations[0].iterators.end());
         for (const Fusion& f : s.fusions)
           for (const std::string* c : {&f.comp_a, &f.comp_b}) {
             const int k = p.computation_index(*c);
             if (k >= 0)
               near.insert(p.computations[size_t(k)].iterators.begin(),
                           p.computations[size_t(k)].iterators.end());
           }
         for (const Iterator& it : p.iterators)
           if (!near.count(it.name)) {
             s.comps[0].parallelized_dim = it.name;
             return true;
           }
         return false;
       }},
      {"one computation entry missing", "bad_schedule_comps",
       [](const Program&, Schedule& s) {
         s.comps.pop_back();
         return true;
       }},
  };
  return all;
}

}  // namespace

TEST_CASE("every schedule of the sample can be applied: validate_schedule accepts it") {
  int64_t schedules = 0;
  for (const Sample& x : samples())
    for (size_t i = 0; i < x.program.schedules.size(); ++i) {
      const Schedule& s = x.program.schedules[i];
      if (!s.parse_problem.empty()) continue;
      ++schedules;
      const std::optional<ScheduleProblem> why = validate_schedule(x.program, s);
      INFO(x.program.name << " schedule " << i << ": " << (why ? why->reason : "") << ": "
                          << (why ? why->detail : ""));
      CHECK(!why);
    }
  MESSAGE(sample_path() << ": " << schedules << " schedules of " << samples().size()
                        << " programs accepted");
  CHECK(samples().size() >= 10);
  CHECK(schedules >= 100);
}

TEST_CASE("each schedule of the sample mutated in each invalid way is refused with its reason") {
  std::map<std::string, int64_t> refused;  // mutation → mutants refused with the right reason
  for (const Sample& x : samples()) {
    const Program& p = x.program;
    // featurize sees the mutants of this program's schedules: schedule 0 as it is, then each
    Program mutated = p;
    mutated.schedules.resize(1);
    std::vector<std::string> want;  // [mutated schedule index − 1]: the reason expected
    for (size_t i = 0; i < p.schedules.size(); ++i) {
      if (!p.schedules[i].parse_problem.empty()) continue;
      for (const Mutation& m : mutations()) {
        Schedule s = p.schedules[i];
        if (!m.apply(p, s)) continue;
        const std::optional<ScheduleProblem> why = validate_schedule(p, s);
        INFO(p.name << " schedule " << i << " with " << m.name);
        REQUIRE(why);
        CHECK(why->reason == m.reason);
        if (why->reason == m.reason) ++refused[m.name];
        if (i % 7 == 0) {  // a sample of the mutants through featurize too
          mutated.schedules.push_back(s);
          want.push_back(m.reason);
        }
      }
    }
    // the readers' path: featurize drops each mutant with the same reason
    FeatureOptions opt;
    opt.keep_unlabeled = true;
    SkipLog log(false, 0);
    std::optional<ProgramFeatures> f = featurize(mutated, opt, log);
    if (!f) continue;  // dropped whole (a program rule): no schedule of it is scored
    std::map<int64_t, std::string> got;
    for (const SkipEvent& e : log.events())
      if (e.level == "schedule") got[e.schedule] = e.reason;
    for (size_t k = 0; k < want.size(); ++k) {
      INFO(p.name << " mutant " << k + 1);
      CHECK(got[int64_t(k + 1)] == want[k]);
    }
    CHECK(f->n_schedules() == 1);  // only schedule 0 is scored
  }
  for (const Mutation& m : mutations()) {
    INFO(m.name);
    CHECK(refused[m.name] > 0);
  }
}

namespace {

/// The computations and their iterators of a record's annotation.
struct Names {
  std::vector<std::string> comps;
  std::map<std::string, std::vector<std::string>> iters;
};
Names names_of(const Program& p) {
  Names n;
  for (const Computation& c : p.computations) {
    n.comps.push_back(c.name);
    n.iters[c.name] = c.iterators;
  }
  return n;
}

/// The reason parse_schedule_json + validate_schedule give schedule text `json` of `p`, or "".
std::string refusal(Program p, const std::string& json) {
  const Schedule s = parse_schedule_json(json, p);
  const std::optional<ScheduleProblem> why = validate_schedule(p, s);
  return why ? why->reason : "";
}

}  // namespace

TEST_CASE("the invalid ways written in each schedule dialect are refused with their reasons") {
  int64_t programs = 0, schedules = 0;
  for (const Sample& x : samples()) {
    const Program& p = x.program;
    const Names n = names_of(p);
    const std::string& c0 = n.comps[0];
    const std::string it0 = n.iters.at(c0)[0];
    INFO(p.name);
    ++programs;
    // structured: every schedule of the record, each mutated in its own dicts
    rapidjson::Document d;
    d.Parse(x.json.c_str(), x.json.size());
    REQUIRE(d.IsObject());
    if (d.HasMember("schedules_list"))
      for (rapidjson::Value& sv : d["schedules_list"].GetArray()) {
        if (!sv.IsObject()) continue;
        ++schedules;
        auto& al = d.GetAllocator();
        auto mutant = [&](const std::function<void(rapidjson::Value&)>& change) {
          rapidjson::Value copy(sv, al);
          copy.RemoveMember("sched_str");  // the dicts are the form read
          copy.RemoveMember("transformations_list");
          change(copy);
          return lcm::test::json_text(copy);
        };
        auto comp_entry = [&](rapidjson::Value& s) -> rapidjson::Value& {
          if (!s.HasMember(c0.c_str()) || !s[c0.c_str()].IsObject()) {
            s.RemoveMember(c0.c_str());
            s.AddMember(rapidjson::Value(c0.c_str(), al), rapidjson::Value(rapidjson::kObjectType),
                        al);
          }
          return s[c0.c_str()];
        };
        auto set = [&](rapidjson::Value& obj, const char* key, rapidjson::Value v) {
          obj.RemoveMember(key);
          obj.AddMember(rapidjson::Value(key, al), v, al);
        };
        auto parse = [&](const char* text) {
          rapidjson::Document t(&al);
          t.Parse(text);
          REQUIRE(!t.HasParseError());
          return rapidjson::Value(t, al);
        };
        const std::string tiling_twice = "{\"tiling_depth\":2,\"tiling_dims\":[\"" + it0 + "\",\"" +
                                         it0 + "\"],\"tiling_factors\":[32,32]}";
        CHECK(refusal(p, mutant([&](rapidjson::Value& s) {
                        set(comp_entry(s), "tiling", parse(tiling_twice.c_str()));
                      })) == "loop_tiled_twice");
        CHECK(refusal(p, mutant([&](rapidjson::Value& s) {
                        set(comp_entry(s), "unrolling_factor", rapidjson::Value(int64_t(1) << 40));
                      })) == "bad_unroll_factor");
        // the self-fusion added to the schedule's own fusions (a fused computation's loops are
        // its partner's: without them its tiling or parallel loop would not be in its nest)
        const std::string self = "[\"" + c0 + "\",\"" + c0 + "\",0]";
        CHECK(refusal(p, mutant([&](rapidjson::Value& s) {
                        if (!s.HasMember("fusions") || !s["fusions"].IsArray())
                          set(s, "fusions", rapidjson::Value(rapidjson::kArrayType));
                        s["fusions"].PushBack(parse(self.c_str()), al);
                      })) == "bad_fusion");
        CHECK(refusal(
                  p, mutant([&](rapidjson::Value& s) {
                    set(s, "no_such_computation",
                        parse("{\"parallelized_dim\":null,\"tiling\":{},\"unrolling_factor\":null,"
                              "\"transformations_list\":[]}"));
                  })) == "unknown_computation");
        CHECK(refusal(p, mutant([&](rapidjson::Value& s) {
                        set(comp_entry(s), "transformations_list",
                            parse("[[3,0,0,0,0,0,0,1,1,1,1,0,0,0,0,0]]"));
                      })) == "bad_transformation");
        if (n.iters.at(c0).size() >= 2)
          CHECK(refusal(p, mutant([&](rapidjson::Value& s) {
                          set(comp_entry(s), "transformations_list",
                              parse("[[3,0,0,0,0,1,0,1,1,1,1,0,0,0,0,0]]"));
                        })) == "singular_transformation");
      }
    // typed transformations_list
    auto typed = [&](const std::string& entry) {
      return refusal(p, "{\"transformations_list\":[" + entry + "]}");
    };
    const std::string cc = "\"computations\":[\"" + c0 + "\"]";
    CHECK(typed("{\"type\":\"tiling\",\"loop_levels\":[0,0],\"parameters\":[32,32]," + cc + "}") ==
          "loop_tiled_twice");
    CHECK(typed("{\"type\":\"unrolling\",\"loop_levels\":[" +
                std::to_string(n.iters.at(c0).size() - 1) + "],\"parameters\":[1099511627776]," +
                cc + "}") == "bad_unroll_factor");
    CHECK(typed("{\"type\":\"skewing\",\"loop_levels\":[0,0],\"parameters\":[1,1,1,1]," + cc +
                "}") == "bad_transformation");
    CHECK(typed("{\"type\":\"fusion\",\"loop_levels\":[0],\"computations\":[\"" + c0 + "\",\"" +
                c0 + "\"]}") == "bad_fusion");
    CHECK(typed("{\"type\":\"parallelization\",\"loop_levels\":[0],\"computations\":[]}") ==
          "bad_transformation_entry");
    // sched_str dialects (the only form of the schedule)
    auto str = [&](const std::string& s) { return refusal(p, "{\"sched_str\":\"" + s + "\"}"); };
    CHECK(str("|||") == "bad_sched_str");
    CHECK(str("| |") == "bad_sched_str");
    // the sched_str parsers refuse a loop tiled twice, a self-fusion and a skewing of one level
    // themselves, by name
    CHECK(str("T2(L0,L0,32,32,comps=['" + c0 + "'])") == "bad_sched_str");
    CHECK(str("{" + c0 + "}:T2(L0,L0,32,32)") == "bad_sched_str");
    CHECK(str("T2({C0},L0,L0,32,32)") == "bad_sched_str");
    CHECK(str("F({C0,C0},L0)") == "bad_sched_str");
    CHECK(str("{" + c0 + "}:S(L0,L0,1,1)") == "bad_sched_str");
    const std::string inner = "L" + std::to_string(p.computations[0].iterators.size() - 1);
    CHECK(str("U({C0}," + inner + ",1099511627776)") == "bad_unroll_factor");
    CHECK(str("{" + c0 + "}:U(" + inner + ",1099511627776)") == "bad_unroll_factor");
    CHECK(str("U(" + inner + ",1099511627776,comps=['" + c0 + "'])") == "bad_unroll_factor");
  }
  CHECK(programs >= 10);
  CHECK(schedules >= 100);
}

TEST_CASE("a transformed schedule 0 is not the untransformed program: note, iterators' tree") {
  // a program of the sample whose schedule 1 is transformed, written with schedule 1 first as
  // one-schedule lines
  for (const Sample& x : samples()) {
    const Program& p = x.program;
    size_t t = 0;
    for (size_t i = 1; i < p.schedules.size() && !t; ++i)
      if (p.schedules[i].parse_problem.empty() && !is_untransformed(p.schedules[i]) &&
          p.schedules[i].fusions.empty())
        t = i;
    if (!t) continue;
    Program q = p;
    std::swap(q.schedules[0], q.schedules[t]);
    q.from_schedule_lines = true;
    SkipLog log(false, 0);
    FeatureOptions opt;
    opt.keep_unlabeled = true;
    std::optional<ProgramFeatures> f = featurize(q, opt, log);
    REQUIRE(f);
    bool noted = false;
    for (const SkipEvent& e : log.events())
      noted = noted || (e.level == "note" && e.reason == "transformed_schedule0");
    CHECK(noted);
    // the loop tree is the iterators' one, as featurize builds it without any tree_structure
    Program bare = q;
    for (Schedule& s : bare.schedules) s.tree.reset();
    SkipLog log2(false, 0);
    std::optional<ProgramFeatures> g = featurize(bare, opt, log2);
    REQUIRE(g);
    CHECK(f->footprint == g->footprint);
    // and the untransformed program as schedule 0 gives no note
    SkipLog log3(false, 0);
    REQUIRE(featurize(p, opt, log3));
    for (const SkipEvent& e : log3.events()) CHECK(e.reason != "transformed_schedule0");
    return;
  }
  FAIL("no program of the sample has a transformed schedule without fusion");
}

namespace {

/// The record `rec` (one whole-program JSONL line) as one-schedule-per-line lines, each with the
/// program fields; `edit(k, line)` may change line k's document before it is written.
std::vector<std::string> as_schedule_lines(
    const std::string& rec,
    const std::function<void(size_t, rapidjson::Document&)>& edit = nullptr) {
  rapidjson::Document d;
  d.Parse(rec.c_str(), rec.size());
  std::vector<std::string> out;
  const rapidjson::Value& list = d["schedules_list"];
  for (rapidjson::SizeType k = 0; k < list.Size(); ++k) {
    rapidjson::Document line;
    line.SetObject();
    auto& al = line.GetAllocator();
    for (auto m = d.MemberBegin(); m != d.MemberEnd(); ++m)
      if (std::string(m->name.GetString()) != "schedules_list")
        line.AddMember(rapidjson::Value(m->name, al), rapidjson::Value(m->value, al), al);
    line.AddMember("schedule", rapidjson::Value(list[k], al), al);
    if (edit) edit(k, line);
    out.push_back(lcm::test::json_text(line));
  }
  return out;
}

/// Parses lines as one group of one-schedule lines; the skips in `log`.
std::optional<Program> read_lines(const std::vector<std::string>& lines, SkipLog& log) {
  RawRecord r;
  r.file = "lines.jsonl";
  r.line = 1;
  r.schedule_line = true;
  r.json = lines[0];
  for (size_t i = 1; i < lines.size(); ++i) {
    r.more_schedule_lines.push_back(lines[i]);
    r.more_schedule_line_numbers.push_back(int64_t(i + 1));
  }
  return parse_program(r, log);
}

}  // namespace

TEST_CASE("one-schedule lines: another initial_execution_time and string schedule_ids are named") {
  int checked = 0;
  for (const Sample& x : samples()) {
    if (x.program.schedules.size() < 4 || checked >= 5) continue;
    ++checked;
    const size_t S = x.program.schedules.size();
    {  // the same program as lines: every schedule read, nothing skipped
      SkipLog log(false, 0);
      std::optional<Program> p = read_lines(as_schedule_lines(x.json), log);
      REQUIRE(p);
      CHECK(p->schedules.size() == S);
      for (const SkipEvent& e : log.events()) CHECK(e.level == "note");
    }
    {  // line 2 with another initial_execution_time: dropped by name; 2.0 written as "2" is kept
      SkipLog log(false, 0);
      std::optional<Program> p =
          read_lines(as_schedule_lines(x.json,
                                       [&](size_t k, rapidjson::Document& l) {
                                         if (k == 1) l["initial_execution_time"] = 12345.5;
                                       }),
                     log);
      REQUIRE(p);
      CHECK(p->schedules.size() == S - 1);
      int n = 0;
      for (const SkipEvent& e : log.events())
        if (e.reason == "initial_execution_time_differs") {
          ++n;
          CHECK(e.line == 2);
          CHECK(lcm::test::contains(e.detail, "12345.5"));
        }
      CHECK(n == 1);
    }
    {  // schedule_id as an integer string is read as its number; as another string, named
      SkipLog log(false, 0);
      std::optional<Program> p = read_lines(
          as_schedule_lines(x.json,
                            [&](size_t k, rapidjson::Document& l) {
                              const std::string id = k == 2 ? "third" : std::to_string(k);
                              l.AddMember("schedule_id",
                                          rapidjson::Value(id.c_str(), l.GetAllocator()),
                                          l.GetAllocator());
                            }),
          log);
      REQUIRE(p);
      CHECK(p->schedules.size() == S - 1);
      int named = 0;
      for (const SkipEvent& e : log.events()) named += e.reason == "bad_schedule_index";
      CHECK(named == 1);
      // read in id order: the line of id "3" follows that of id "1"
      CHECK(p->schedules[0].execution_times == x.program.schedules[0].execution_times);
      CHECK(p->schedules[1].execution_times == x.program.schedules[1].execution_times);
      CHECK(p->schedules[2].execution_times == x.program.schedules[3].execution_times);
    }
  }
  CHECK(checked > 0);
}

TEST_CASE("lcm-serve refuses schedules that cannot be applied, each with its reason") {
  const std::string dir = lcm::test::temp_dir("validate_serve");
  const std::string ckpt = dir + "/w.safetensors";
  lcm::test::write_random_checkpoint(ckpt);
  lcm::config::Config c;
  lcm::config::apply_overrides(c, {"eval.weights_path=" + ckpt});
  lcm::serve::Scorer scorer(c);
  const std::vector<std::string> lines = lcm::test::gz_lines(sample_path());
  REQUIRE(!lines.empty());
  const lcm::test::QueryProgram q = lcm::test::query_program(lines[0]);
  const Sample& x = samples()[0];
  REQUIRE(x.program.name == q.name);
  const std::string c0 = x.program.computations[0].name;
  const std::string it0 = x.program.computations[0].iterators[0];
  const std::vector<std::string> bad = {
      q.program,  // the program annotation as the candidate (looper line 3)
      "{\"" + c0 + "\":{\"tiling\":{\"tiling_depth\":2,\"tiling_dims\":[\"" + it0 + "\",\"" + it0 +
          "\"],\"tiling_factors\":[32,32]}}}",
      "{\"" + c0 + "\":{\"unrolling_factor\":1099511627776}}",
      "{\"fusions\":[[\"" + c0 + "\",\"" + c0 + "\",0]]}",
      "{\"sched_str\":\"|||\"}",
      "{\"no_such_computation\":{\"parallelized_dim\":null}}",
  };
  const std::vector<std::string> reasons = {"not_a_schedule",    "loop_tiled_twice",
                                            "bad_unroll_factor", "bad_fusion",
                                            "bad_sched_str",     "unknown_computation"};
  std::vector<std::string> asked = bad;
  asked.push_back(q.schedules[1]);
  const std::vector<lcm::serve::ScheduleScore> got =
      scorer.score(q.program, q.untransformed, asked);
  REQUIRE(got.size() == asked.size());
  for (size_t i = 0; i < bad.size(); ++i) {
    INFO(bad[i]);
    CHECK(!got[i].ok());
    CHECK(got[i].reason == reasons[i]);
  }
  CHECK(got.back().ok());
  // the jsonl protocol: the error answer names each refused schedule with its reason
  std::string req = "{\"program\":" + q.program + ",\"untransformed\":" + q.untransformed +
                    ",\"schedules\":[" + bad[1] + "," + q.schedules[1] + "]}";
  int64_t n = 0;
  bool had_error = false;
  std::string error;
  std::string answer = lcm::serve::answer_jsonl(scorer, req, n, had_error, error);
  CHECK(had_error);
  CHECK(lcm::test::contains(answer, "\"reason\":\"loop_tiled_twice\""));
  // a key twice in the request wrapper: refused, not read one way (the first "schedules")
  req = "{\"program\":" + q.program + ",\"schedules\":[" + q.schedules[1] + "],\"schedules\":[" +
        bad[1] + "]}";
  answer = lcm::serve::answer_jsonl(scorer, req, n, had_error, error);
  CHECK(had_error);
  CHECK(lcm::test::contains(answer, "duplicate_key"));
  CHECK(!lcm::test::contains(answer, "speedups"));
  // a transformed schedule as the untransformed one (looper line 2): the program is refused
  bool refused = false;
  try {
    scorer.score(q.program, "{\"" + c0 + "\":{\"unrolling_factor\":4}}", {q.schedules[1]});
  } catch (const lcm::serve::QueryError& e) {
    refused = true;
    CHECK(e.reason == "transformed_schedule0");
  }
  CHECK(refused);
}
