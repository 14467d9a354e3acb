// The cost model's host-side inputs (docs/model-spec.md §5.4): the prepared leaves of a batch
// (ForwardInputs) with the distinct tag blocks and the once-per-program static columns, the
// schedule columns of the first-layer weight, and the per-program rows of the shared path.
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "engine/bf16.hpp"
#include "engine/device_memory.hpp"
#include "engine/ops.hpp"
#include "model/cost_model.hpp"
#include "model/cost_model_detail.hpp"

namespace lcm::model {

using namespace detail;  // NOLINT: the column blocks and input helpers of this model

namespace {

constexpr int W = data::kCompVectorWidth;
constexpr int kTagValues = kNumTags * data::kMaxTags;
constexpr int64_t kExprValues = data::kMaxExprLen * data::kExprNodeWidth;  // per Expr row

/// Rows [r0, r0 + n) of the Expr and Static leaves of `in` (host values) as inputs of their own.
template <class T>
ForwardInputs<T> static_part(const ForwardInputs<T>& in, int64_t r0, int64_t n) {
  const Shape es = in.shape(InputLeaf::Expr), ss = in.shape(InputLeaf::Static);
  const int64_t R = ss[0], ew = es.numel() / R, sw = ss.numel() / R;  // values per row
  ForwardInputs<T> part;
  part.n_programs = 1;
  Shape pe = es, ps = ss;
  pe[0] = n;
  ps[0] = n;
  part.shapes[size_t(InputLeaf::Expr)] = pe;
  part.shapes[size_t(InputLeaf::Static)] = ps;
  const int64_t s_off = (n * ew + 63) / 64 * 64;
  part.offsets[size_t(InputLeaf::Expr)] = 0;
  part.offsets[size_t(InputLeaf::Static)] = s_off;
  part.total = s_off + n * sw;
  part.host.assign(size_t(part.total), T(0));
  const T* e0 = in.host.data() + in.offset(InputLeaf::Expr) + r0 * ew;
  const T* s0 = in.host.data() + in.offset(InputLeaf::Static) + r0 * sw;
  std::copy(e0, e0 + n * ew, part.host.begin());
  std::copy(s0, s0 + n * sw, part.host.begin() + s_off);
  return part;
}

/// Lays leaf `l` of `shape` after the others in in.host, at a multiple of 64 values.
template <class T>
void place(ForwardInputs<T>& in, InputLeaf l, Shape shape) {
  in.shapes[size_t(l)] = shape;
  in.offsets[size_t(l)] = in.total;
  in.total += (shape.numel() + 63) / 64 * 64;
}

/// The rows of the tag-vector leaf, into [0, N): every row (naive), or the distinct 64-value tag
/// blocks (first occurrence) with each row's block in *inverse: many schedules share a
/// computation's transformations (e.g. none at all), and the BiLSTM's result is broadcast back.
std::vector<int64_t> tag_rows(const float* comp, int64_t N, bool naive,
                              std::vector<int64_t>* inverse) {
  std::vector<int64_t> rows;
  if (naive) {
    for (int64_t r = 0; r < N; ++r) rows.push_back(r);
    return rows;
  }
  std::unordered_map<std::string, int64_t> seen;
  seen.reserve(size_t(N));
  inverse->resize(size_t(N));
  for (int64_t r = 0; r < N; ++r) {
    std::string key(reinterpret_cast<const char*>(comp + r * W + kTagsStart),
                    sizeof(float) * kTagValues);
    auto it = seen.emplace(std::move(key), int64_t(rows.size())).first;
    if (it->second == int64_t(rows.size())) rows.push_back(r);
    (*inverse)[size_t(r)] = it->second;
  }
  return rows;
}

/// The first datapoint of each of the batch's P programs (-1: none).
std::vector<int64_t> first_points(const data::BatchTensors& bt) {
  std::vector<int64_t> rep(bt.programs.size(), -1);
  for (int64_t b = 0; b < bt.batch; ++b)
    if (rep[size_t(bt.program_of[size_t(b)])] < 0) rep[size_t(bt.program_of[size_t(b)])] = b;
  return rep;
}

/// Whether every datapoint's static columns equal bitwise those of its program's first datapoint
/// `rep`, so that the first layer's static part can be evaluated once per program.
bool static_columns_shared(const data::BatchTensors& bt, const data::BatchLayout& lay,
                           const std::vector<int64_t>& rep) {
  for (int64_t r : rep)
    if (r < 0) return false;
  const float* comp = bt.comp.data();
  for (int64_t b = 0; b < bt.batch; ++b) {
    const float* x = comp + lay.comp_row[size_t(b)] * W;
    const float* r = comp + lay.comp_row[size_t(rep[size_t(bt.program_of[size_t(b)])])] * W;
    const int64_t C = lay.comp_row[size_t(b + 1)] - lay.comp_row[size_t(b)];
    for (int64_t c = 0; c < C; ++c)
      for (const auto& [first, count] : column_split().static_runs)  // bitwise, run by run
        if (std::memcmp(&x[c * W + first], &r[c * W + first], sizeof(float) * size_t(count)) != 0)
          return false;
  }
  return true;
}

/// o[i] = T(src[i]) for i < n.
template <class T>
void convert(T* o, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = T(src[i]);
}

/// Throws std::invalid_argument when the given per-program rows (prepare_shared_inputs) cannot
/// replace the static leaves: static columns that differ within a program, or another size than
/// expr_rows × H0.
template <class T>
void check_program_rows(const std::vector<T>* rows, bool share, int64_t expr_rows, int64_t H0) {
  if (rows && !share)
    throw std::invalid_argument(
        "CostModel::prepare_shared_inputs: the static columns differ between the datapoints of "
        "a program");
  if (rows && int64_t(rows->size()) != expr_rows * H0)
    throw std::invalid_argument("CostModel::prepare_shared_inputs: " +
                                std::to_string(rows->size()) + " program-row values for " +
                                std::to_string(expr_rows) + " rows of width " + std::to_string(H0));
}

/// o[r·width + j] = T(comp[r·W + col0 + j]): a block of columns of the computation rows.
template <class T>
void copy_columns(T* o, const float* comp, int64_t rows, int col0, int width) {
  for (int64_t r = 0; r < rows; ++r)
    for (int j = 0; j < width; ++j) o[r * width + j] = T(comp[r * W + col0 + j]);
}

/// The Expr leaf: each program's expression rows (level-batched) or each datapoint's (naive).
template <class T>
void fill_expr(T* o, const data::BatchTensors& bt, const data::BatchLayout& lay, bool naive) {
  if (!naive) return convert(o, bt.expr.data(), lay.expr_rows() * kExprValues);
  for (int64_t b = 0; b < bt.batch; ++b)
    convert(o + lay.comp_row[size_t(b)] * kExprValues,
            bt.expr.data() + lay.expr_row[size_t(bt.program_of[size_t(b)])] * kExprValues,
            (lay.comp_row[size_t(b + 1)] - lay.comp_row[size_t(b)]) * kExprValues);
}

/// The Static leaf [Σ C_p, Zs] (zero-filled): each program's first datapoint `rep` with its
/// static columns at their z0 positions (tags of width Dt).
template <class T>
void fill_static(T* o, const data::BatchTensors& bt, const data::BatchLayout& lay,
                 const std::vector<int64_t>& rep, int64_t Zs, int Dt) {
  for (size_t p = 0; p < rep.size(); ++p)
    for (int64_t c = 0; c < lay.expr_row[p + 1] - lay.expr_row[p]; ++c) {
      const float* x = bt.comp.data() + (lay.comp_row[size_t(rep[p])] + c) * W;
      T* dst = o + (lay.expr_row[p] + c) * Zs;
      for (int col : column_split().static_cols) dst[z0_column(col, Dt)] = T(x[col]);
    }
}

}  // namespace

template <class T>
ForwardInputs<T> CostModel<T>::prepare(const data::BatchTensors& bt, const data::BatchLayout& lay,
                                       bool naive, bool force_share,
                                       const std::vector<T>* rows) const {
  const int64_t B = bt.batch, N = lay.comp_rows(), P = int64_t(bt.programs.size());
  ForwardInputs<T> in;
  in.batch = B, in.n_comps = bt.n_comps, in.n_loops = bt.n_loops, in.n_programs = P,
  in.naive = naive;
  in.segments = lay.segments;
  in.program_of.assign(bt.program_of.begin(), bt.program_of.end());
  // C differs between segments: per-program rows broadcast row by row
  if (in.n_comps == 0) in.shared_row = program_rows_of(bt, lay);
  const std::vector<int64_t> tags = tag_rows(bt.comp.data(), N, naive, &in.tag_inverse);
  const int64_t U = int64_t(tags.size());
  place(in, InputLeaf::Tags, Shape{U, kNumTags, data::kMaxTags});
  // expression rows (Q8: all 66 steps, no packing): per datapoint (naive) or per program
  if (!rows)
    place(in, InputLeaf::Expr,
          Shape{naive ? N : lay.expr_rows(), data::kMaxExprLen, data::kExprNodeWidth});
  const std::vector<int64_t> rep = first_points(bt);
  in.share_static = !naive && (force_share || (cfg_.share_static_columns && P < B)) &&
                    static_columns_shared(bt, lay, rep);
  // Static rows are z0 without the expression columns, schedule columns and tags left at zero
  // (embed_computations multiplies them by the whole first-layer weight).
  const ColumnSplit& cs = column_split();
  const int Dt = 2 * cfg_.lstm_embedding_size;
  const int64_t Zs = kFirstWidth + Dt + kThirdWidth, D = int64_t(cs.sched_cols.size());
  const int64_t H0 = cfg_.comp_embed_layer_sizes[0];
  check_program_rows(rows, in.share_static, lay.expr_rows(), H0);
  if (in.share_static) {
    if (rows)
      place(in, InputLeaf::ProgramRows, Shape{lay.expr_rows(), H0});
    else
      place(in, InputLeaf::Static, Shape{lay.expr_rows(), Zs});
    place(in, InputLeaf::Sched, Shape{N, D});
  } else {
    place(in, InputLeaf::First, Shape{N, kFirstWidth});
    place(in, InputLeaf::Third, Shape{N, kThirdWidth});
  }
  place(in, InputLeaf::Loops, Shape{lay.loop_rows(), int64_t(data::kLoopVectorWidth)});

  in.host.assign(size_t(in.total), T(0));
  auto at = [&](InputLeaf l) { return in.host.data() + in.offset(l); };
  const float* comp = bt.comp.data();
  for (int64_t u = 0; u < U; ++u)
    copy_columns(at(InputLeaf::Tags) + u * kTagValues, comp + tags[size_t(u)] * W, 1, kTagsStart,
                 kTagValues);
  if (rows)
    std::copy(rows->begin(), rows->end(), at(InputLeaf::ProgramRows));
  else
    fill_expr(at(InputLeaf::Expr), bt, lay, naive);
  if (in.share_static) {
    if (!rows) fill_static(at(InputLeaf::Static), bt, lay, rep, Zs, Dt);
    T* o = at(InputLeaf::Sched);
    for (int64_t r = 0; r < N; ++r)
      for (int64_t j = 0; j < D; ++j) o[r * D + j] = T(comp[r * W + cs.sched_cols[size_t(j)]]);
  } else {
    copy_columns(at(InputLeaf::First), comp, N, 0, kFirstWidth);
    copy_columns(at(InputLeaf::Third), comp, N, kThirdStart, kThirdWidth);
  }
  convert(at(InputLeaf::Loops), bt.loops.data(), lay.loop_rows() * data::kLoopVectorWidth);
  return in;
}

template <class T>
ForwardInputs<T> CostModel<T>::prepare_inputs(const data::BatchTrees& trees,
                                              const data::BatchTensors& bt) const {
  if (cfg_.encoder.kind != EncoderKind::None)
    throw std::logic_error(
        "CostModel::prepare_inputs: not available for a model with a pre-trained encoder "
        "(model.encoder); use forward(tape, trees, bt, rng)");
  const data::BatchLayout lay = check_batch(trees, bt);  // also the trees' shapes (roots, cycles)
  return prepare(bt, lay, false);
}

template <class T>
ForwardInputs<T> CostModel<T>::prepare_shared_inputs(const data::BatchTrees& trees,
                                                     const data::BatchTensors& bt,
                                                     const std::vector<T>* rows) const {
  if (cfg_.encoder.kind != EncoderKind::None)
    throw std::logic_error(
        "CostModel::prepare_shared_inputs: not available for a model with a pre-trained encoder "
        "(model.encoder)");
  const data::BatchLayout lay = check_batch(trees, bt);
  ForwardInputs<T> in = prepare(bt, lay, false, true, rows);
  if (!in.share_static)
    throw std::invalid_argument(
        "CostModel::prepare_shared_inputs: the static columns differ between the datapoints of "
        "a program");
  return in;
}

template <class T>
std::vector<int64_t> CostModel<T>::schedule_weight_columns() const {
  const int Dt = 2 * cfg_.lstm_embedding_size;
  std::vector<int64_t> cols;
  for (int c : column_split().sched_cols) cols.push_back(z0_column(c, Dt));
  for (int j = 0; j < Dt; ++j) cols.push_back(kFirstWidth + j);
  return cols;
}

template <class T>
std::vector<T> CostModel<T>::schedule_weight() const {
  const Parameter<T>& w0 = *store_.find("comp_embedding_layers.0.weight");
  const std::vector<int64_t> cols = schedule_weight_columns();
  const int64_t R = w0.shape[0], K = w0.shape[1], M = int64_t(cols.size());
  std::vector<T> out(size_t(R * M));
  for (int64_t r = 0; r < R; ++r)
    for (int64_t j = 0; j < M; ++j)
      out[size_t(r * M + j)] = w0.value[size_t(r * K + cols[size_t(j)])];
  return out;
}

template <class T>
void CostModel<T>::use_bf16_weights() {
  if constexpr (!std::is_same_v<T, float>) {
    throw std::logic_error("CostModel::use_bf16_weights: float models only");
  } else {
    if (bf16_weights()) return;
    for (Parameter<T>& p : store_.all()) {
      const std::string& n = p.name;
      const bool weight =
          p.shape.rank == 2 &&
          ((n.size() >= 7 && n.compare(n.size() - 7, 7, ".weight") == 0) ||
           n.find(".weight_ih") != std::string::npos || n.find(".weight_hh") != std::string::npos);
      if (weight) p.bf16.bits = round_to_bf16(p.value.data(), int64_t(p.value.size()));
    }
    // the schedule columns of the rounded first-layer weight (exact in BF16); an encoder model
    // has no shared first layer (ForwardInputs::sched_weight is never given for it)
    if (cfg_.encoder.kind == EncoderKind::None) {
      std::vector<T> sw = schedule_weight();
      sched_weight_bf16_.bits = round_to_bf16(sw.data(), int64_t(sw.size()));
    }
  }
}

template <class T>
std::vector<T> CostModel<T>::program_rows(Tape<T>& tape, const data::BatchTrees& trees,
                                          const data::BatchTensors& bt) {
  return program_rows(tape, trees, bt, 0);
}

template <class T>
std::vector<T> CostModel<T>::program_rows(Tape<T>& tape, const data::BatchTrees& trees,
                                          const data::BatchTensors& bt, int64_t max_rows) {
  const ForwardInputs<T> in = prepare_shared_inputs(trees, bt, nullptr);  // its checks too
  auto evaluate = [&](const ForwardInputs<T>& part) {
    tape.clear();
    tape.set_training(false);
    tape.set_grad_enabled(false);
    return to_host(tape.value(static_rows(tape, part)));
  };
  const int64_t R = in.shape(InputLeaf::Static)[0];
  if (max_rows <= 0 || R <= max_rows || in.device) return evaluate(in);
  std::vector<T> out;
  for (int64_t r0 = 0; r0 < R; r0 += max_rows) {
    const std::vector<T> rows = evaluate(static_part(in, r0, std::min(max_rows, R - r0)));
    out.insert(out.end(), rows.begin(), rows.end());
  }
  tape.clear();
  return out;
}

#define LCM_COST_MODEL_INPUTS(T)                                                              \
  template ForwardInputs<T> CostModel<T>::prepare(                                            \
      const data::BatchTensors&, const data::BatchLayout&, bool, bool, const std::vector<T>*) \
      const;                                                                                  \
  template ForwardInputs<T> CostModel<T>::prepare_inputs(const data::BatchTrees&,             \
                                                         const data::BatchTensors&) const;    \
  template ForwardInputs<T> CostModel<T>::prepare_shared_inputs(                              \
      const data::BatchTrees&, const data::BatchTensors&, const std::vector<T>*) const;       \
  template std::vector<int64_t> CostModel<T>::schedule_weight_columns() const;                \
  template std::vector<T> CostModel<T>::schedule_weight() const;                              \
  template void CostModel<T>::use_bf16_weights();                                             \
  template std::vector<T> CostModel<T>::program_rows(Tape<T>&, const data::BatchTrees&,       \
                                                     const data::BatchTensors&);              \
  template std::vector<T> CostModel<T>::program_rows(Tape<T>&, const data::BatchTrees&,       \
                                                     const data::BatchTensors&, int64_t);
LCM_COST_MODEL_INPUTS(float)
LCM_COST_MODEL_INPUTS(double)

}  // namespace lcm::model
