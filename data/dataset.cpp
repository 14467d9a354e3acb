// Footprint grouping, the §3.11 group rule, seeded batching (docs/model-spec.md §5.5) and the dense
// batch tensors built from ProgramFeatures.
#include "data/dataset.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <unordered_map>

#include "engine/rng.hpp"
#include "util/fnv1a.hpp"

namespace lcm::data {

bool FoldSelection::keeps(const std::string& name) const {
  return !active() || (program_fold(name, count) == fold) == only;
}

std::string FoldSelection::text() const {
  const std::string f = "fold " + std::to_string(fold + 1) + " of " + std::to_string(count);
  return only ? f + " only" : "without " + f;
}

int program_fold(const std::string& name, int count) {
  if (count < 1) throw std::invalid_argument("program_fold: count must be >= 1");
  // FNV-1a from a basis other than the standard one (a digit short of it): this basis decides
  // which fold each program has been in, in every cross-fitted run so far
  const uint64_t h = fnv1a64(name.data(), name.size(), 1469598103934665603ull);
  return int(lcm::mix64(h) % uint64_t(count));
}

int64_t Dataset::n_datapoints() const {
  int64_t n = 0;
  for (auto& p : programs) n += p.n_schedules();
  return n;
}

std::vector<BatchSegment> BatchTensors::segment_list() const {
  if (!segments.empty()) return segments;
  return {BatchSegment{batch, n_comps, n_loops}};
}

BatchLayout batch_layout(const BatchTensors& bt) {
  auto bad = [](const std::string& w) { throw std::invalid_argument("BatchTensors: " + w); };
  BatchLayout l;
  l.segments = bt.segment_list();
  const int64_t B = bt.batch, P = int64_t(bt.programs.size());
  if (int64_t(bt.program_of.size()) != B) bad("program_of is not [B]");
  l.segment_point.assign(1, 0);
  l.comp_row.assign(1, 0);
  l.loop_row.assign(1, 0);
  std::vector<int64_t> comps_of_program(size_t(P), 0);
  int64_t b = 0;
  for (const BatchSegment& s : l.segments) {
    if (s.points < 1 || s.n_comps < 1 || s.n_loops < 1)
      bad("segment needs points, C, L >= 1, got " + std::to_string(s.points) + ", " +
          std::to_string(s.n_comps) + ", " + std::to_string(s.n_loops));
    if (b + s.points > B) bad("segments hold more datapoints than the batch");
    if ((bt.n_comps != 0 && bt.n_comps != s.n_comps) ||
        (bt.n_loops != 0 && bt.n_loops != s.n_loops))
      bad("n_comps / n_loops disagree with a segment (0 = they differ between segments)");
    for (int64_t i = 0; i < s.points; ++i, ++b) {
      const int32_t p = bt.program_of[size_t(b)];
      if (p < 0 || p >= P)
        bad("program_of entry " + std::to_string(p) + " outside [0, " + std::to_string(P) + ")");
      int64_t& c = comps_of_program[size_t(p)];
      if (c != 0 && c != s.n_comps)
        bad("program " + std::to_string(p) + " has datapoints in segments of different C");
      c = s.n_comps;
      l.comp_row.push_back(l.comp_row.back() + s.n_comps);
      l.loop_row.push_back(l.loop_row.back() + s.n_loops);
    }
    l.segment_point.push_back(b);
  }
  if (b != B)
    bad("segments cover " + std::to_string(b) + " of " + std::to_string(B) + " datapoints");
  l.expr_row.assign(1, 0);
  for (int64_t p = 0; p < P; ++p) {
    if (comps_of_program[size_t(p)] == 0) bad("program " + std::to_string(p) + " has no datapoint");
    l.expr_row.push_back(l.expr_row.back() + comps_of_program[size_t(p)]);
  }
  if (int64_t(bt.comp.size()) != l.comp_rows() * kCompVectorWidth)
    bad("comp is not [rows, 910] with " + std::to_string(l.comp_rows()) + " rows");
  if (int64_t(bt.loops.size()) != l.loop_rows() * kLoopVectorWidth)
    bad("loops is not [rows, 8] with " + std::to_string(l.loop_rows()) + " rows");
  if (int64_t(bt.expr.size()) != l.expr_rows() * kMaxExprLen * kExprNodeWidth)
    bad("expr is not [rows, 66, 11] with " + std::to_string(l.expr_rows()) + " rows");
  if (!bt.speedup.empty() && int64_t(bt.speedup.size()) != B)
    bad("speedup is neither empty nor [B]");
  return l;
}

std::vector<float> BatchTensors::expr_per_datapoint() const {
  const BatchLayout l = batch_layout(*this);
  constexpr int64_t per = kMaxExprLen * kExprNodeWidth;
  std::vector<float> out(size_t(l.comp_rows() * per));
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t rows = l.comp_row[size_t(b + 1)] - l.comp_row[size_t(b)];
    std::memcpy(out.data() + l.comp_row[size_t(b)] * per,
                expr.data() + l.expr_row[size_t(program_of[size_t(b)])] * per,
                sizeof(float) * size_t(rows * per));
  }
  return out;
}

namespace {

bool same_shape(const ProgramFeatures& a, const ProgramFeatures& b) {
  return a.n_comps == b.n_comps && a.n_loops == b.n_loops && a.footprint == b.footprint;
}

const Batch& batch_at(const std::vector<Batch>& batches, int64_t b, const char* what) {
  if (b < 0 || b >= int64_t(batches.size()))
    throw std::out_of_range(std::string("Dataset::") + what + ": batch " + std::to_string(b) +
                            " of " + std::to_string(batches.size()));
  return batches[size_t(b)];
}

const ProgramFeatures& program_at(const std::vector<ProgramFeatures>& programs,
                                  const DatapointRef& r) {
  if (r.program < 0 || size_t(r.program) >= programs.size() ||
      (r.schedule == kIdentitySchedule
           ? !programs[size_t(r.program)].has_identity()
           : (r.schedule < 0 || r.schedule >= programs[size_t(r.program)].n_schedules())))
    throw std::out_of_range("Dataset: datapoint (" + std::to_string(r.program) + ", " +
                            std::to_string(r.schedule) + ") outside the dataset");
  return programs[size_t(r.program)];
}

}  // namespace

const ProgramTree& Dataset::tree(int64_t b) const {
  const Batch& batch = batch_at(batches, b, "tree");
  if (batch.points.empty())
    throw std::out_of_range("Dataset::tree: batch " + std::to_string(b) + " is empty");
  const BatchTrees t = trees(batch);
  if (t.size() != 1)
    throw std::logic_error("Dataset::tree: batch " + std::to_string(b) + " holds " +
                           std::to_string(t.size()) + " tree shapes (use Dataset::trees)");
  return *t[0];
}

BatchTrees Dataset::trees(int64_t b) const {
  return trees(batch_at(batches, b, "trees"));
}

BatchTrees Dataset::trees(const Batch& batch) const {
  BatchTrees out;
  const ProgramFeatures* seg = nullptr;
  for (const DatapointRef& r : batch.points) {
    const ProgramFeatures& p = program_at(programs, r);
    if (seg && (&p == seg || same_shape(p, *seg))) continue;
    seg = &p;
    out.push_back(&p.tree);
  }
  return out;
}

BatchTensors Dataset::materialize(int64_t b) const {
  return materialize(batch_at(batches, b, "materialize"));
}

BatchTensors Dataset::materialize(const Batch& batch) const {
  BatchTensors t;
  t.batch = batch.size();
  t.speedup.resize(size_t(t.batch));
  t.program_of.resize(size_t(t.batch));
  // segments and row counts first, so the arrays are allocated once
  const ProgramFeatures* seg = nullptr;
  int64_t comp_rows = 0, loop_rows = 0;
  for (const DatapointRef& r : batch.points) {
    const ProgramFeatures& p = program_at(programs, r);
    if (!seg || (&p != seg && !same_shape(p, *seg))) {
      t.segments.push_back(BatchSegment{0, p.n_comps, p.n_loops});
      seg = &p;
    }
    t.segments.back().points += 1;
    comp_rows += p.n_comps;
    loop_rows += p.n_loops;
  }
  bool same_c = true, same_l = true;
  for (const BatchSegment& s : t.segments) {
    same_c = same_c && s.n_comps == t.segments[0].n_comps;
    same_l = same_l && s.n_loops == t.segments[0].n_loops;
  }
  t.n_comps = same_c && !t.segments.empty() ? t.segments[0].n_comps : 0;
  t.n_loops = same_l && !t.segments.empty() ? t.segments[0].n_loops : 0;
  if (t.segments.size() == 1) t.segments.clear();  // the dense layout
  t.comp.resize(size_t(comp_rows * kCompVectorWidth));
  t.loops.resize(size_t(loop_rows * kLoopVectorWidth));
  std::unordered_map<int32_t, int32_t> seen;
  int64_t comp_at = 0, loop_at = 0, expr_rows = 0;
  for (int64_t i = 0; i < t.batch; ++i) {
    const DatapointRef& r = batch.points[size_t(i)];
    const ProgramFeatures& p = programs[size_t(r.program)];
    p.comp_vectors(r.schedule, t.comp.data() + comp_at * kCompVectorWidth,
                   t.loops.data() + loop_at * kLoopVectorWidth);
    comp_at += p.n_comps;
    loop_at += p.n_loops;
    t.speedup[size_t(i)] =
        r.schedule == kIdentitySchedule ? 1.0f : p.speedup.at(size_t(r.schedule));
    auto it = seen.find(r.program);
    if (it == seen.end()) {
      it = seen.emplace(r.program, int32_t(t.programs.size())).first;
      t.programs.push_back(r.program);
      expr_rows += p.n_comps;
    }
    t.program_of[size_t(i)] = it->second;
  }
  constexpr int64_t per = kMaxExprLen * kExprNodeWidth;
  t.expr.resize(size_t(expr_rows * per));
  int64_t at = 0;
  for (int32_t pi : t.programs) {
    const ProgramFeatures& p = programs[size_t(pi)];
    std::memcpy(t.expr.data() + at * per, p.expr.data(), sizeof(float) * size_t(p.n_comps * per));
    at += p.n_comps;
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
    p.comp_vectors(s, t.comp.data() + s * C * kCompVectorWidth,
                   t.loops.data() + s * L * kLoopVectorWidth);
  }
  t.speedup.assign(p.speedup.begin(), p.speedup.begin() + t.batch);
  t.programs = {index};
  t.program_of.assign(size_t(t.batch), 0);
  t.expr = p.expr;
  return t;
}

BatchTensors identity_batch(const ProgramFeatures& p, int32_t index) {
  BatchTensors t;
  t.batch = 1;
  t.n_comps = p.n_comps;
  t.n_loops = p.n_loops;
  t.comp.resize(size_t(p.n_comps) * kCompVectorWidth);
  t.loops.resize(size_t(p.n_loops) * kLoopVectorWidth);
  p.comp_vectors(kIdentitySchedule, t.comp.data(), t.loops.data());
  t.speedup = {1.0f};
  t.programs = {index};
  t.program_of = {0};
  t.expr = p.expr;
  return t;
}

namespace {

/// Pieces looked ahead for one that fits a batch's space.
constexpr size_t kPackWindow = 64;

/// The mixed batches of build_batches (its comment states the rule), appended to `batches`.
/// n_sched[p]: kept schedules of program p; group_of[p]: its footprint group; piece: most
/// schedules of one program per piece (0 = whole programs).
void mixed_batches(std::vector<Batch>& batches, const std::vector<int32_t>& n_sched,
                   const std::vector<int32_t>& group_of, int batch_size, int piece, lcm::Rng& rng) {
  const int64_t cap = batch_size;
  const int32_t n_programs = int32_t(n_sched.size());
  std::vector<int32_t> order(static_cast<size_t>(n_programs));
  for (int32_t p = 0; p < n_programs; ++p) order[size_t(p)] = p;
  fisher_yates(order, rng);
  // each program's schedules in a shuffled order (drawn in the shuffled program order)
  std::vector<std::vector<int32_t>> sched(static_cast<size_t>(n_programs));
  for (int32_t p : order) {
    auto& v = sched[size_t(p)];
    v.resize(size_t(n_sched[size_t(p)]));
    for (size_t s = 0; s < v.size(); ++s) v[s] = int32_t(s);
    fisher_yates(v, rng);
  }
  struct Part {            // schedules [first, first + count) of program p's shuffled order
    int32_t program = -1;  // -1: placed already (in the queue)
    int64_t first = 0, count = 0;
  };
  auto emit = [&](std::vector<Part>& parts) {
    // ordered by footprint group, then program, each by first appearance in the batch (stable):
    // one segment per group, a program's pieces next to each other
    std::unordered_map<int32_t, int32_t> group_rank, program_rank;
    for (const Part& q : parts) {
      group_rank.emplace(group_of[size_t(q.program)], int32_t(group_rank.size()));
      program_rank.emplace(q.program, int32_t(program_rank.size()));
    }
    std::stable_sort(parts.begin(), parts.end(), [&](const Part& a, const Part& b) {
      const int32_t ga = group_rank[group_of[size_t(a.program)]],
                    gb = group_rank[group_of[size_t(b.program)]];
      return ga != gb ? ga < gb : program_rank[a.program] < program_rank[b.program];
    });
    Batch b;
    b.group = group_rank.size() == 1 ? group_of[size_t(parts[0].program)] : -1;
    for (const Part& q : parts)
      for (int64_t i = 0; i < q.count; ++i)
        b.points.push_back({q.program, sched[size_t(q.program)][size_t(q.first + i)]});
    batches.push_back(std::move(b));
    parts.clear();
  };
  // Programs larger than a batch: whole batches of their own, in the shuffled order. The others
  // are cut into ⌈S / piece⌉ pieces of near-equal size, and the pieces are shuffled.
  std::vector<Part> queue;
  std::vector<Part> parts;
  for (int32_t p : order) {
    const int64_t S = int64_t(sched[size_t(p)].size());
    if (S <= cap) {
      const int64_t n = piece > 0 ? (S + piece - 1) / piece : 1;
      for (int64_t k = 0, first = 0; k < n; ++k) {
        const int64_t count = S / n + (k < S % n ? 1 : 0);
        queue.push_back({p, first, count});
        first += count;
      }
      continue;
    }
    for (int64_t first = 0; first < S; first += cap) {
      parts.push_back({p, first, std::min(cap, S - first)});
      emit(parts);
    }
  }
  if (piece > 0) fisher_yates(queue, rng);
  // Full batches in order, looking ahead for a piece that fits, else one split.
  int64_t space = cap;
  size_t next = 0;  // queue[next..] not placed yet; placed entries inside the window are -1
  auto place = [&](size_t at) {
    parts.push_back(queue[at]);
    space -= queue[at].count;
    queue[at].program = -1;
  };
  while (true) {
    while (next < queue.size() && queue[next].program < 0) ++next;
    if (next >= queue.size()) break;
    const int64_t S = queue[next].count;
    if (S <= space) {
      place(next);
    } else {
      size_t found = queue.size();
      for (size_t j = next + 1, seen = 0; j < queue.size() && seen < kPackWindow; ++j) {
        if (queue[j].program < 0) continue;
        ++seen;
        if (queue[j].count <= space) {
          found = j;
          break;
        }
      }
      if (found < queue.size()) {
        place(found);
      } else {  // split: the first `space` schedules complete this batch
        const Part q = queue[next];
        parts.push_back({q.program, q.first, space});
        emit(parts);
        parts.push_back({q.program, q.first + space, S - space});
        space = cap - (S - space);
        queue[next].program = -1;
        continue;
      }
    }
    if (space == 0) {
      emit(parts);
      space = cap;
    }
  }
  if (!parts.empty()) emit(parts);
}

}  // namespace

BatchPlan plan_batches(const std::vector<ProgramShape>& programs,
                       const std::vector<ShapeInfo>& shapes, const BatchingOptions& opt,
                       SkipLog& log) {
  if (opt.batch_size < 1) throw std::invalid_argument("build_batches: batch_size must be >= 1");
  // Groups are the shapes, in order of first appearance.
  struct Group {
    FootprintGroup info;
    std::vector<int32_t> members;  // indices into the input programs
  };
  std::vector<Group> groups(shapes.size());
  for (size_t g = 0; g < shapes.size(); ++g) {
    groups[g].info.footprint = shapes[g].footprint;
    groups[g].info.n_comps = shapes[g].n_comps;
    groups[g].info.n_loops = shapes[g].n_loops;
  }
  for (size_t i = 0; i < programs.size(); ++i) {
    const int32_t sh = programs[i].shape;
    if (sh < 0 || size_t(sh) >= groups.size())
      throw std::invalid_argument("plan_batches: program shape index out of range");
    Group& g = groups[size_t(sh)];
    g.members.push_back(int32_t(i));
    g.info.n_programs += 1;
    g.info.n_datapoints += programs[i].n_schedules;
  }

  // §3.11: drop groups with < m programs AND < 100·m datapoints.
  const int64_t m = opt.min_functions_per_footprint;
  BatchPlan plan;
  plan.keep.assign(programs.size(), 0);
  std::vector<Group> kept;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    Group& g = groups[gi];
    if (g.members.empty()) continue;  // a shape no program has
    if (m > 0 && g.info.n_programs < m && g.info.n_datapoints < 100 * m) {
      SkipEvent e;
      e.level = "footprint";
      e.reason = "small_footprint_group";
      e.file = opt.source_file;
      e.program = shapes[gi].first_program;
      e.detail = "footprint " + g.info.footprint + ": " + std::to_string(g.info.n_programs) +
                 " program(s), " + std::to_string(g.info.n_datapoints) + " datapoint(s) (< " +
                 std::to_string(m) + " programs and < " + std::to_string(100 * m) + " datapoints)";
      log.add(e);
      plan.batching.groups_dropped += 1;
      plan.batching.programs_dropped += g.info.n_programs;
      plan.batching.datapoints_dropped += g.info.n_datapoints;
      continue;
    }
    for (int32_t i : g.members) plan.keep[size_t(i)] = 1;
    kept.push_back(std::move(g));
  }
  plan.batching.groups_kept = int64_t(kept.size());

  // The kept programs keep their input order, renumbered.
  std::vector<int32_t> new_index(programs.size(), -1);
  std::vector<int32_t> n_sched;
  for (size_t i = 0; i < programs.size(); ++i) {
    if (!plan.keep[i]) continue;
    new_index[i] = int32_t(n_sched.size());
    n_sched.push_back(programs[i].n_schedules);
  }

  lcm::Rng rng(opt.seed);
  for (auto& g : kept) plan.groups.push_back(g.info);
  if (opt.mode == BatchingMode::PerFootprint) {
    // Shuffle inside each group, cut chunks, shuffle all batches (one seeded stream).
    for (size_t gi = 0; gi < kept.size(); ++gi) {
      const Group& g = kept[gi];
      std::vector<DatapointRef> points;
      points.reserve(size_t(g.info.n_datapoints));
      for (int32_t i : g.members) {
        const int32_t pi = new_index[size_t(i)];
        const int64_t S = n_sched[size_t(pi)];
        for (int64_t s = 0; s < S; ++s) points.push_back({pi, int32_t(s)});
      }
      fisher_yates(points, rng);
      for (size_t start = 0; start < points.size(); start += size_t(opt.batch_size)) {
        Batch b;
        b.group = int32_t(gi);
        size_t end = std::min(points.size(), start + size_t(opt.batch_size));
        b.points.assign(points.begin() + std::ptrdiff_t(start),
                        points.begin() + std::ptrdiff_t(end));
        plan.batches.push_back(std::move(b));
      }
    }
  } else {
    std::vector<int32_t> group_of(n_sched.size(), 0);
    for (size_t gi = 0; gi < kept.size(); ++gi)
      for (int32_t i : kept[gi].members) group_of[size_t(new_index[size_t(i)])] = int32_t(gi);
    mixed_batches(plan.batches, n_sched, group_of, opt.batch_size, opt.program_piece, rng);
  }
  fisher_yates(plan.batches, rng);
  return plan;
}

int32_t ShapeTable::shape_of(const std::string& footprint, int n_comps, int n_loops,
                             const std::string& program) {
  std::string key = footprint + "|" + std::to_string(n_comps) + "|" + std::to_string(n_loops);
  auto it = index_.find(key);
  if (it != index_.end()) return it->second;
  const int32_t id = int32_t(shapes.size());
  index_.emplace(std::move(key), id);
  shapes.push_back(ShapeInfo{footprint, n_comps, n_loops, program});
  return id;
}

void build_batches(Dataset& ds, const BatchingOptions& opt, SkipLog& log) {
  ShapeTable table;
  std::vector<ProgramShape> shapes(ds.programs.size());
  for (size_t i = 0; i < ds.programs.size(); ++i) {
    const ProgramFeatures& p = ds.programs[i];
    shapes[i].shape = table.shape_of(p.footprint, p.n_comps, p.n_loops, p.name);
    shapes[i].n_schedules = int32_t(p.n_schedules());
  }
  BatchPlan plan = plan_batches(shapes, table.shapes, opt, log);
  // Compact the program list (input order).
  std::vector<ProgramFeatures> programs;
  programs.reserve(ds.programs.size());
  for (size_t i = 0; i < ds.programs.size(); ++i)
    if (plan.keep[i]) programs.push_back(std::move(ds.programs[i]));
  ds.programs = std::move(programs);
  ds.groups = std::move(plan.groups);
  ds.batches = std::move(plan.batches);
  ds.batching = plan.batching;
}

}  // namespace lcm::data
