// Footprint grouping, the §3.11 group rule, seeded batching (docs/model-spec.md §5.5) and the dense
// batch tensors built from ProgramFeatures.
#include "data/dataset.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <unordered_map>

#include "engine/rng.hpp"

namespace lcm::data {

int64_t Dataset::n_datapoints() const {
  int64_t n = 0;
  for (auto& p : programs) n += p.n_schedules();
  return n;
}

std::vector<float> BatchTensors::expr_per_datapoint() const {
  const int64_t per = n_comps * kMaxExprLen * kExprNodeWidth;
  std::vector<float> out(size_t(batch * per));
  for (int64_t b = 0; b < batch; ++b)
    std::memcpy(out.data() + b * per, expr.data() + int64_t(program_of[size_t(b)]) * per,
                sizeof(float) * size_t(per));
  return out;
}

const ProgramTree& Dataset::tree(int64_t b) const {
  if (b < 0 || b >= int64_t(batches.size()) || batches[size_t(b)].points.empty())
    throw std::out_of_range("Dataset::tree: batch " + std::to_string(b) + " of " +
                            std::to_string(batches.size()));
  return programs.at(size_t(batches[size_t(b)].points[0].program)).tree;
}

BatchTensors Dataset::materialize(int64_t b) const {
  if (b < 0 || b >= int64_t(batches.size()))
    throw std::out_of_range("Dataset::materialize: batch " + std::to_string(b) + " of " +
                            std::to_string(batches.size()));
  const Batch& batch = batches[size_t(b)];
  const FootprintGroup& g = groups.at(size_t(batch.group));
  BatchTensors t;
  t.batch = batch.size();
  t.n_comps = g.n_comps;
  t.n_loops = g.n_loops;
  const int64_t C = t.n_comps, L = t.n_loops;
  t.comp.resize(size_t(t.batch * C * kCompVectorWidth));
  t.loops.resize(size_t(t.batch * L * kLoopVectorWidth));
  t.speedup.resize(size_t(t.batch));
  t.program_of.resize(size_t(t.batch));
  std::unordered_map<int32_t, int32_t> seen;
  for (int64_t i = 0; i < t.batch; ++i) {
    const DatapointRef& r = batch.points[size_t(i)];
    const ProgramFeatures& p = programs.at(size_t(r.program));
    if (p.n_comps != C || p.n_loops != L)
      throw std::logic_error("Dataset::materialize: program " + p.name +
                             " does not match its group");
    p.comp_vectors(r.schedule, t.comp.data() + i * C * kCompVectorWidth);
    p.schedule_rows(r.schedule, nullptr, t.loops.data() + i * L * kLoopVectorWidth);
    t.speedup[size_t(i)] = p.speedup.at(size_t(r.schedule));
    auto it = seen.find(r.program);
    if (it == seen.end()) {
      it = seen.emplace(r.program, int32_t(t.programs.size())).first;
      t.programs.push_back(r.program);
    }
    t.program_of[size_t(i)] = it->second;
  }
  const int64_t per = C * kMaxExprLen * kExprNodeWidth;
  t.expr.resize(t.programs.size() * size_t(per));
  for (size_t j = 0; j < t.programs.size(); ++j) {
    const ProgramFeatures& p = programs[size_t(t.programs[j])];
    std::memcpy(t.expr.data() + int64_t(j) * per, p.expr.data(), sizeof(float) * size_t(per));
  }
  return t;
}

BatchTensors program_batch(const ProgramFeatures& p, int32_t index, int64_t n) {
  BatchTensors t;
  t.batch = std::max<int64_t>(0, std::min<int64_t>(n, p.n_schedules()));
  t.n_comps = p.n_comps;
  t.n_loops = p.n_loops;
  const int64_t C = p.n_comps, L = p.n_loops;
  t.comp.resize(size_t(t.batch * C * kCompVectorWidth));
  t.loops.resize(size_t(t.batch * L * kLoopVectorWidth));
  for (int64_t s = 0; s < t.batch; ++s) {
    p.comp_vectors(s, t.comp.data() + s * C * kCompVectorWidth);
    p.schedule_rows(s, nullptr, t.loops.data() + s * L * kLoopVectorWidth);
  }
  t.speedup.assign(p.speedup.begin(), p.speedup.begin() + t.batch);
  t.programs = {index};
  t.program_of.assign(size_t(t.batch), 0);
  t.expr = p.expr;
  return t;
}

void build_batches(Dataset& ds, const BatchingOptions& opt, SkipLog& log) {
  if (opt.batch_size < 1) throw std::invalid_argument("build_batches: batch_size must be >= 1");
  // Group by (footprint, C, L) in order of first appearance.
  struct Group {
    FootprintGroup info;
    std::vector<int32_t> members;  // indices into the input programs
  };
  std::vector<Group> groups;
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < ds.programs.size(); ++i) {
    const ProgramFeatures& p = ds.programs[i];
    std::string key =
        p.footprint + "|" + std::to_string(p.n_comps) + "|" + std::to_string(p.n_loops);
    auto it = index.find(key);
    if (it == index.end()) {
      it = index.emplace(key, groups.size()).first;
      Group g;
      g.info.footprint = p.footprint;
      g.info.n_comps = p.n_comps;
      g.info.n_loops = p.n_loops;
      groups.push_back(std::move(g));
    }
    Group& g = groups[it->second];
    g.members.push_back(int32_t(i));
    g.info.n_programs += 1;
    g.info.n_datapoints += p.n_schedules();
  }

  // §3.11: drop groups with < m programs AND < 100·m datapoints.
  const int64_t m = opt.min_functions_per_footprint;
  std::vector<char> keep_program(ds.programs.size(), 0);
  std::vector<Group> kept;
  ds.batching = BatchingStats{};
  for (auto& g : groups) {
    if (m > 0 && g.info.n_programs < m && g.info.n_datapoints < 100 * m) {
      const ProgramFeatures& first = ds.programs[size_t(g.members[0])];
      SkipEvent e;
      e.level = "footprint";
      e.reason = "small_footprint_group";
      e.file = opt.source_file;
      e.program = first.name;
      e.detail = "footprint " + g.info.footprint + ": " + std::to_string(g.info.n_programs) +
                 " program(s), " + std::to_string(g.info.n_datapoints) + " datapoint(s) (< " +
                 std::to_string(m) + " programs and < " + std::to_string(100 * m) + " datapoints)";
      log.add(e);
      ds.batching.groups_dropped += 1;
      ds.batching.programs_dropped += g.info.n_programs;
      ds.batching.datapoints_dropped += g.info.n_datapoints;
      continue;
    }
    for (int32_t i : g.members) keep_program[size_t(i)] = 1;
    kept.push_back(std::move(g));
  }
  ds.batching.groups_kept = int64_t(kept.size());

  // Compact the program list (input order) and renumber.
  std::vector<int32_t> new_index(ds.programs.size(), -1);
  std::vector<ProgramFeatures> programs;
  programs.reserve(ds.programs.size());
  for (size_t i = 0; i < ds.programs.size(); ++i) {
    if (!keep_program[i]) continue;
    new_index[i] = int32_t(programs.size());
    programs.push_back(std::move(ds.programs[i]));
  }
  ds.programs = std::move(programs);

  // Shuffle inside each group, cut chunks, shuffle all batches (one seeded stream).
  lcm::Rng rng(opt.seed);
  ds.groups.clear();
  ds.batches.clear();
  for (auto& g : kept) {
    const int32_t gi = int32_t(ds.groups.size());
    ds.groups.push_back(g.info);
    std::vector<DatapointRef> points;
    points.reserve(size_t(g.info.n_datapoints));
    for (int32_t i : g.members) {
      const int32_t pi = new_index[size_t(i)];
      const int64_t S = ds.programs[size_t(pi)].n_schedules();
      for (int64_t s = 0; s < S; ++s) points.push_back({pi, int32_t(s)});
    }
    fisher_yates(points, rng);
    for (size_t start = 0; start < points.size(); start += size_t(opt.batch_size)) {
      Batch b;
      b.group = gi;
      size_t end = std::min(points.size(), start + size_t(opt.batch_size));
      b.points.assign(points.begin() + std::ptrdiff_t(start), points.begin() + std::ptrdiff_t(end));
      ds.batches.push_back(std::move(b));
    }
  }
  fisher_yates(ds.batches, rng);
}

}  // namespace lcm::data
