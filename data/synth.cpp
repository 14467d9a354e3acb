// The synthetic generator's entry points (synth.hpp, docs/synth.md): one program is a pure
// function of (seed, index) — its structure, its schedules and their times, each drawn from its
// own random stream — returned as a Program or written as one JSONL object.
#include "data/synth.hpp"

#include <rapidjson/stringbuffer.h>

#include <cstdio>
#include <optional>
#include <stdexcept>
#include <unordered_set>

#include "data/schedule_validation.hpp"
#include "data/synth_internal.hpp"

namespace lcm::data {
namespace synth_detail {

void check_options(const SynthOptions& opt) {
  if (opt.schedules_per_program < 1)
    throw std::invalid_argument("synth: schedules_per_program must be >= 1");
  if (opt.programs < 0) throw std::invalid_argument("synth: programs must be >= 0");
  if (!(opt.failed_fraction >= 0 && opt.failed_fraction <= 1) ||
      !(opt.missing_fraction >= 0 && opt.missing_fraction <= 1) ||
      !(opt.failed_fraction + opt.missing_fraction <= 1))
    throw std::invalid_argument(
        "synth: failed/missing fractions must lie in [0, 1] and sum to <= 1");
  if (opt.structures < 0) throw std::invalid_argument("synth: structures must be >= 0");
  if (opt.chunk_programs < 0) throw std::invalid_argument("synth: chunk_programs must be >= 0");
  if (opt.compression_level < 0 || opt.compression_level > 9)
    throw std::invalid_argument("synth: compression level must be 0..9");
}

ProgramGenerator::ProgramGenerator(const SynthOptions& opt, int64_t index, const SynthTimeModel& tm)
    : opt_(opt), tm_(tm) {
  uint64_t base = mix64(opt.seed * 0x9E3779B97F4A7C15ull + uint64_t(index));
  Rng r_prog(base);
  r_sched_ = Rng(mix64(base ^ 1));
  r_time_ = Rng(mix64(base ^ 2));
  r_fate_ = Rng(mix64(base ^ 3));
  Program& p = rec_.program;
  char nm[64];
  std::snprintf(nm, sizeof nm, "synth_%llu_%07lld", (unsigned long long)opt.seed, (long long)index);
  p.name = nm;
  std::vector<int> comp_loop;
  if (opt.structures > 0) {  // the skeleton comes from a pool shared by all programs of the seed
    Rng r_pick(mix64(base ^ 4));
    const uint64_t skeleton = r_pick.below(uint64_t(opt.structures));
    Rng r_struct(mix64(0x57A7C7ull * 0x9E3779B97F4A7C15ull + skeleton));
    build_structure(r_struct, rec_, comp_loop);
  } else {
    build_structure(r_prog, rec_, comp_loop);
  }
  build_bounds(r_prog, rec_);
  build_computations(r_prog, rec_, comp_loop);
  fill_iterators(rec_);
  space_ = schedule_space(rec_, comp_loop);
}

bool ProgramGenerator::next(Schedule& s, bool& null_times) {
  if (next_ >= opt_.schedules_per_program) return false;
  const int si = next_++;
  if (si == 0) {
    s = Schedule{};
    s.comps.assign(rec_.program.computations.size(), CompSchedule{});
    s.tree = space_.tree0;
    seen_.insert("");
  } else {
    s = random_schedule(r_sched_, rec_, space_, seen_);
  }
  // self-check: the generator writes only schedules every reader and lcm-serve accept
  if (std::optional<ScheduleProblem> why = validate_schedule(rec_.program, s))
    throw std::logic_error("synth: schedule " + std::to_string(si) + " of program " +
                           rec_.program.name + " cannot be applied: " + why->reason + ": " +
                           why->detail);
  // times: failed / missing fates come from their own stream so the knobs change nothing else
  double fate = r_fate_.next_double();
  null_times = chance(r_fate_, 0.5);
  double mean = model_time_ms(rec_, s, tm_);
  s.execution_times = measure(r_time_, mean, tm_);
  if (si > 0 && fate < opt_.failed_fraction) {
    s.execution_times.assign(1, -1.0);
  } else if (si > 0 && fate < opt_.failed_fraction + opt_.missing_fraction) {
    s.execution_times.clear();
  }
  if (si == 0) rec_.program.initial_execution_time = s.min_time();
  return true;
}

Record generate(const SynthOptions& opt, int64_t index, const SynthTimeModel& tm) {
  ProgramGenerator g(opt, index, tm);
  Record& rec = g.record();
  rec.program.schedules.reserve(size_t(opt.schedules_per_program));
  rec.null_times.reserve(size_t(opt.schedules_per_program));
  Schedule s;
  bool null_times = false;
  while (g.next(s, null_times)) {
    rec.null_times.push_back(null_times ? 1 : 0);
    rec.program.schedules.push_back(std::move(s));
  }
  return std::move(rec);
}

}  // namespace synth_detail

Program synth_program(const SynthOptions& opt, int64_t index, const SynthTimeModel& tm) {
  synth_detail::check_options(opt);
  return synth_detail::generate(opt, index, tm).program;
}

void synth_program_json(const SynthOptions& opt, int64_t index, std::string& out,
                        const SynthTimeModel& tm) {
  synth_detail::check_options(opt);
  synth_detail::Record rec = synth_detail::generate(opt, index, tm);
  rapidjson::StringBuffer sb;
  synth_detail::write_record(rec, index, opt.seed, sb);
  out.append(sb.GetString(), sb.GetSize());
}

}  // namespace lcm::data
