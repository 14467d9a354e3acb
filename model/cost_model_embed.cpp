// The cost model's computation embeddings (docs/model-spec.md §5.4 steps 1–4, §8): the
// expression and tag LSTMs, the first layer (whole, or split into a once-per-program static part
// and a per-row schedule part) and the computation MLP, or the §8 encoder's features.
#include "engine/lstm.hpp"
#include "engine/ops.hpp"
#include "model/cost_model.hpp"
#include "model/cost_model_detail.hpp"

namespace lcm::model {

using namespace detail;  // NOLINT: the column blocks and input helpers of this model

template <class T>
NodeId CostModel<T>::comp_embeddings(Tape<T>& tape, const data::BatchTensors& bt,
                                     const data::BatchLayout& lay, Rng& rng, bool naive) {
  if (cfg_.encoder.kind != EncoderKind::None) {  // model-spec §8: encoder features → the same MLP
    NodeId h = ops::linear_elu(tape, encoder_features(tape, bt, lay, rng),
                               tape.param(store_.at("comp_embedding_layers.0.weight")),
                               tape.param(store_.at("comp_embedding_layers.0.bias")));
    h = ops::dropout(tape, h, cfg_.drops[0], rng);
    return comp_mlp(tape, h, rng);  // [N, E]
  }

  return embed_computations(tape, prepare(bt, lay, naive), rng);
}

template <class T>
NodeId CostModel<T>::comp_mlp(Tape<T>& tape, NodeId h, Rng& rng) {
  for (size_t i = 1; i < cfg_.comp_embed_layer_sizes.size(); ++i)
    h = dense(tape, h, "comp_embedding_layers", int(i), cfg_.drops[i], rng);
  return h;
}

template <class T>
NodeId CostModel<T>::expression_embedding(Tape<T>& tape, const ForwardInputs<T>& in) {
  // 1. expression embedding: per datapoint (naive) or per program, [rows, Ex]
  const LstmSpec expr_spec{data::kExprNodeWidth, cfg_.expr_embed_size, 1, false};
  const auto expr_w = lstm_weight_nodes(tape, store_, "exprs_embed", expr_spec);
  const int64_t expr_rows = in.shape(InputLeaf::Expr)[0];
  const NodeId expr_in = input_leaf(tape, in, InputLeaf::Expr);
  return ops::reshape(tape, ops::lstm(tape, expr_in, expr_spec, expr_w).h_n,
                      Shape{expr_rows, int64_t(cfg_.expr_embed_size)});
}

template <class T>
NodeId CostModel<T>::static_rows(Tape<T>& tape, const ForwardInputs<T>& in) {
  // Each program's z0 rows with the schedule columns (and tags) left at zero, against the whole
  // first-layer weight. The few P·C rows cost less than gathering the 864 static columns of the
  // 600×1146 weight on every call (and scatter-adding their gradient), and one row runs as a
  // matrix-vector product that reads the weight in place.
  const NodeId static_in = input_leaf(tape, in, InputLeaf::Static);
  return ops::linear(tape, ops::concat(tape, {static_in, expression_embedding(tape, in)}, 1),
                     tape.param(store_.at("comp_embedding_layers.0.weight")));
}

template <class T>
NodeId CostModel<T>::tag_embeddings(Tape<T>& tape, const ForwardInputs<T>& in) {
  // 2. tag vectors: encode_vectors then the BiLSTM; [forward h_T | backward h after step 0] → [N,
  // Dt].
  const NodeId tags_in = input_leaf(tape, in, InputLeaf::Tags);
  const int64_t U = in.shape(InputLeaf::Tags)[0];
  const NodeId enc = ops::linear(tape, tags_in, tape.param(store_.at("encode_vectors.weight")),
                                 tape.param(store_.at("encode_vectors.bias")));
  const LstmSpec tag_spec{data::kMaxTags, cfg_.lstm_embedding_size, 1, true};
  const LstmOutputs tag_out =
      ops::lstm(tape, enc, tag_spec,
                lstm_weight_nodes(tape, store_, "transformation_vectors_embed", tag_spec));
  const int64_t Ht = cfg_.lstm_embedding_size;
  NodeId tags =
      ops::concat(tape,
                  {ops::reshape(tape, ops::slice(tape, tag_out.h_n, 0, 0, 1), Shape{U, Ht}),
                   ops::reshape(tape, ops::slice(tape, tag_out.h_n, 0, 1, 1), Shape{U, Ht})},
                  1);
  if (U != comp_rows(in.segments)) tags = ops::index_select(tape, tags, 0, in.tag_inverse);
  return tags;  // [N, Dt]
}

template <class T>
NodeId CostModel<T>::shared_first_layer(Tape<T>& tape, const ForwardInputs<T>& in, NodeId tags,
                                        NodeId w0, NodeId b0) {
  // Static part once per program (static_rows, or given: ProgramRows), schedule part per row.
  const int64_t C = in.n_comps, N = comp_rows(in.segments), P = in.n_programs;
  const int64_t H0 = cfg_.comp_embed_layer_sizes[0];
  const NodeId sched_in = input_leaf(tape, in, InputLeaf::Sched);
  const int64_t Ws = int64_t(column_split().sched_cols.size()) + 2 * cfg_.lstm_embedding_size;
  const bool given = in.sched_weight && tape.device() == Device::CPU && !tape.grad_enabled();
  const NodeId w_sched =
      given ? tape.new_view(Tensor<T>{const_cast<T*>(in.sched_weight), Shape{H0, Ws}, Device::CPU},
                            "input")
            : ops::select_columns(tape, w0, schedule_weight_columns());
  // the given columns are schedule_weight() of this model's weights: with use_bf16_weights, its
  // BF16 bits are sched_weight_bf16_
  if (given && cfg_.encoder.kind == EncoderKind::None && !sched_weight_bf16_.bits.empty())
    tape.node(w_sched).bf16 = sched_weight_bf16_.bits.data();
  NodeId per_prog = in.has(InputLeaf::ProgramRows) ? input_leaf(tape, in, InputLeaf::ProgramRows)
                                                   : static_rows(tape, in);  // [P·C, H0]
  NodeId per_point;
  if (C > 0) {
    per_prog = ops::reshape(tape, per_prog, Shape{P, C * H0});
    per_point =
        ops::reshape(tape, ops::index_select(tape, per_prog, 0, in.program_of), Shape{N, H0});
  } else {
    per_point = ops::index_select(tape, per_prog, 0, in.shared_row);
  }
  NodeId sched = ops::linear(tape, ops::concat(tape, {sched_in, tags}, 1), w_sched, b0);
  return ops::add(tape, sched, per_point);
}

template <class T>
NodeId CostModel<T>::whole_first_layer(Tape<T>& tape, const ForwardInputs<T>& in, NodeId tags,
                                       NodeId w0, NodeId b0) {
  const int64_t C = in.n_comps, N = comp_rows(in.segments), P = in.n_programs;
  const int64_t Ex = cfg_.expr_embed_size;
  const NodeId expr_h = expression_embedding(tape, in);
  NodeId expr_pt = expr_h;
  if (!in.naive && C > 0)
    expr_pt = ops::reshape(
        tape,
        ops::index_select(tape, ops::reshape(tape, expr_h, Shape{P, C * Ex}), 0, in.program_of),
        Shape{N, Ex});
  else if (!in.naive)
    expr_pt = ops::index_select(tape, expr_h, 0, in.shared_row);
  const NodeId first = input_leaf(tape, in, InputLeaf::First);
  const NodeId third = input_leaf(tape, in, InputLeaf::Third);
  // 3. z0 = [first 33 | tags Dt | third 813 | expr Ex]
  const NodeId z0 = ops::concat(tape, {first, tags, third, expr_pt}, 1);
  return ops::linear(tape, z0, w0, b0);
}

template <class T>
NodeId CostModel<T>::embed_computations(Tape<T>& tape, const ForwardInputs<T>& in, Rng& rng) {
  // C = 0: the computation count differs between segments (shared rows broadcast via shared_row)
  const NodeId tags = tag_embeddings(tape, in);
  const NodeId w0 = tape.param(store_.at("comp_embedding_layers.0.weight"));
  const NodeId b0 = tape.param(store_.at("comp_embedding_layers.0.bias"));
  const NodeId h = in.share_static ? shared_first_layer(tape, in, tags, w0, b0)
                                   : whole_first_layer(tape, in, tags, w0, b0);
  // 4. computation MLP: (Linear → ELU → Dropout(drops[i])) × n
  return comp_mlp(tape, ops::dropout(tape, ops::elu(tape, h), cfg_.drops[0], rng), rng);
}

template <class T>
NodeId CostModel<T>::encoder_features(Tape<T>& tape, const data::BatchTensors& bt,
                                      const data::BatchLayout& lay, Rng& rng) {
  const int64_t N = lay.comp_rows();
  const int W = data::kCompVectorWidth, X = data::kMaxExprLen * data::kExprNodeWidth;
  const float* comp = bt.comp.data();
  const std::vector<int64_t> expr_row = program_rows_of(bt, lay);
  auto expr_of = [&](int64_t r) { return bt.expr.data() + expr_row[size_t(r)] * X; };
  const bool dropout = !encoder_frozen_;
  if (cfg_.encoder.kind == EncoderKind::CompVector) {
    // §8.1: the thresholded 1636-vector of every computation row through the encoder → [N, 350]
    std::vector<float> rows(size_t(N * kCompAeInputWidth));
    for (int64_t r = 0; r < N; ++r)
      comp_vector_ae_input(comp + r * W, expr_of(r), &rows[size_t(r * kCompAeInputWidth)]);
    return encode(tape, store_, cfg_.encoder, rows.data(), N, dropout, rng);
  }
  // §8.2: [columns 0–206 | encoded access sequence | raw expression] → [N, 1573]; the encoder
  // runs once per distinct access sequence (schedule-independent: once per program computation)
  std::vector<float> rows(size_t(N * kAccessInputWidth));
  for (int64_t r = 0; r < N; ++r)
    access_ae_input(comp + r * W, &rows[size_t(r * kAccessInputWidth)]);
  const NodeId enc = encode(tape, store_, cfg_.encoder, rows.data(), N, dropout, rng);
  const NodeId raw = make_input(tape, Shape{N, kEncoderRawColumns}, [&](T* o) {
    for (int64_t r = 0; r < N; ++r)
      for (int j = 0; j < kEncoderRawColumns; ++j)
        o[r * kEncoderRawColumns + j] = T(comp[r * W + j]);
  });
  const NodeId expr = make_input(tape, Shape{N, X}, [&](T* o) {
    for (int64_t r = 0; r < N; ++r) {
      const float* e = expr_of(r);
      for (int j = 0; j < X; ++j) o[r * X + j] = T(e[j]);
    }
  });
  return ops::concat(tape, {raw, enc, expr}, 1);
}

#define LCM_COST_MODEL_EMBED(T)                                                               \
  template NodeId CostModel<T>::comp_embeddings(Tape<T>&, const data::BatchTensors&,          \
                                                const data::BatchLayout&, Rng&, bool);        \
  template NodeId CostModel<T>::comp_mlp(Tape<T>&, NodeId, Rng&);                             \
  template NodeId CostModel<T>::expression_embedding(Tape<T>&, const ForwardInputs<T>&);      \
  template NodeId CostModel<T>::static_rows(Tape<T>&, const ForwardInputs<T>&);               \
  template NodeId CostModel<T>::tag_embeddings(Tape<T>&, const ForwardInputs<T>&);            \
  template NodeId CostModel<T>::shared_first_layer(Tape<T>&, const ForwardInputs<T>&, NodeId, \
                                                   NodeId, NodeId);                           \
  template NodeId CostModel<T>::whole_first_layer(Tape<T>&, const ForwardInputs<T>&, NodeId,  \
                                                  NodeId, NodeId);                            \
  template NodeId CostModel<T>::embed_computations(Tape<T>&, const ForwardInputs<T>&, Rng&);  \
  template NodeId CostModel<T>::encoder_features(Tape<T>&, const data::BatchTensors&,         \
                                                 const data::BatchLayout&, Rng&);
LCM_COST_MODEL_EMBED(float)
LCM_COST_MODEL_EMBED(double)

}  // namespace lcm::model
