// The LOOPer recursive-LSTM cost model (docs/model-spec.md §5, [CM] modeling.py
// Model_Recursive_LSTM_v2): PyTorch-named parameters with the reference initialisation, the
// level-batched training/inference forward pass (program-level sharing of schedule-independent
// work) and the plain reference walk.
#pragma once
#include <cstdint>
#include <vector>

#include "data/dataset.hpp"
#include "data/features.hpp"
#include "engine/parameter.hpp"
#include "engine/rng.hpp"
#include "engine/tape.hpp"
#include "model/autoencoder.hpp"
#include "model/forward_inputs.hpp"
#include "model/forward_memo.hpp"

namespace lcm::model {

/// Hyper-parameters of the model (model-spec §5.1; release values are the defaults).
/// E = comp_embed_layer_sizes.back() is the embedding size of computations, loop nodes and roots.
struct ModelConfig {
  /// Width of [first part | third part] of the computation vector (33 + 813, §3.9). Must be 846:
  /// the split of the 910-wide vector is fixed.
  int input_size = 846;
  /// Output widths of the computation MLP (§5.2); at least 2 entries, all ≥ 1. The concat and
  /// regression MLPs use the last two ([-2], [-1]).
  std::vector<int> comp_embed_layer_sizes{600, 350, 200, 180};
  /// Dropout probabilities in [0, 1]: comp layer i uses drops[i]; concat/regression layer i uses
  /// drops[i] (i = 0, 1), as the reference. Needs ≥ max(comp layers, 2) entries.
  std::vector<double> drops{0.05, 0.05, 0.05, 0.05, 0.05};
  /// Hidden size per direction of the tag BiLSTM (transformation_vectors_embed).
  int lstm_embedding_size = 100;
  /// Hidden size of the expression LSTM (exprs_embed).
  int expr_embed_size = 100;
  /// Width of a loop vector (§3.8). Must be 8 (data::kLoopVectorWidth).
  int loops_tensor_size = 8;
  /// Evaluate the first computation-MLP layer's schedule-independent columns (764 of the 846
  /// features plus the expression embedding) once per distinct program (W·x split by columns;
  /// mathematically identical, float rounding differs slightly). Used only when the batch's
  /// static columns really are equal across each program's datapoints (checked; otherwise the
  /// per-datapoint path runs).
  bool share_static_columns = true;
  /// Pre-trained encoder of the computation vectors (model-spec §8; model.encoder): kind None is
  /// the §5 model. CompVector: per computation the thresholded 1636-vector → encoder → first
  /// MLP layer 350 → sizes[0] (no tag BiLSTM / expression LSTM). AccessMatrix: per computation
  /// [columns 0–206 raw | encoder output 640 | raw expression 726] = 1573 → sizes[0]. Its
  /// parameters are "encoder.*" in this model's store (checkpoints carry them).
  AutoencoderConfig encoder = no_encoder();
  /// Output convention (§5.2): false = the reference head, predict → LeakyReLU(0.01) → ŷ as a
  /// speedup ×; true = the head without the LeakyReLU, its output is ln(speedup) (trained with a
  /// log-space or ranking loss; tools exponentiate it to report a speedup). Stored in checkpoints
  /// ("output": "speedup" | "log_speedup" in lcm.model_config).
  bool log_output = false;
  /// Prediction relative to the program's own untransformed schedule (model.relative_to_identity,
  /// docs/accuracy.md): the reported ln(speedup) of schedule s is f(s) − f(identity), f the
  /// network's output and identity the program's schedule data::kIdentitySchedule, so the
  /// untransformed program predicts exactly 1×. Needs log_output. forward() itself still returns
  /// f; model::score_batch (scoring) and train::BatchInput (training steps, through
  /// model::relative_to_untransformed) subtract. Stored in
  /// checkpoints ("relative_to": "identity" in lcm.model_config; absent = none).
  bool relative_to_identity = false;

  /// E, the embedding size.
  int embed_size() const {
    return comp_embed_layer_sizes.empty() ? 0 : comp_embed_layer_sizes.back();
  }
  /// Throws std::invalid_argument naming the first bad field.
  void validate() const;
};

/// The computation columns [0, n) of the 910-wide vector that input scaling (model.input_scaling)
/// may change for a model of `cfg`: all 910 without an encoder; 0 with the comp_vector encoder,
/// which reads every column raw (§8.1); 207 with the access_matrix encoder, whose first 207
/// columns feed the first MLP layer directly and the rest the encoder (§8.2).
int scaled_comp_columns(const ModelConfig& cfg);

/// The cost model with its parameters (float for training, double for gradient checks).
/// Parameter names and shapes are those of the reference PyTorch module's state_dict (§5.2). Order
/// (an assumption: the original [CM] module could not be checked here) = the state_dict order of
/// bench/reference/looper_model.py, which registers sub-modules in the §5.2 table order; PyTorch
/// lists a module's own parameters before its sub-modules: no_comps_tensor [1,E],
/// no_nodes_tensor [1,E], encode_vectors.* [16,16]/[16], transformation_vectors_embed.* (with
/// *_reverse), exprs_embed.*, comp_embedding_layers.{i}.weight/bias, comps_lstm.*, nodes_lstm.*,
/// roots_lstm.*, concat_layers.{0,1}.*, regression_layers.{0,1}.*, predict.* [1,E]/[1].
/// Checkpoints should be matched by name, not by position.
template <class T>
class CostModel {
 public:
  /// Creates and initialises every parameter (§5.3) from lcm::Rng(seed): comp/regression/predict
  /// weights Xavier-uniform, concat weights zero (Q13), biases and encode_vectors.weight PyTorch's
  /// Linear default U(±1/√fan_in), no_comps/no_nodes Xavier on [1,E], LSTMs U(±1/√hidden).
  /// Release sizes give 2,109,623 weights. Throws std::invalid_argument for a bad config.
  CostModel(const ModelConfig& cfg, uint64_t seed);

  ParameterStore<T>& params() { return store_; }
  const ParameterStore<T>& params() const { return store_; }
  const ModelConfig& config() const { return cfg_; }

  /// The encoder's parameters ("encoder.*", model-spec §8), empty when config().encoder is None.
  std::vector<Parameter<T>*> encoder_parameters();
  /// Every other parameter (what the main optimizer updates, as the reference's name filter).
  std::vector<Parameter<T>*> non_encoder_parameters();
  /// Frozen (model-spec §8 step 3): requires_grad off on the encoder's parameters and its
  /// dropout off (eval mode) whatever the tape's mode; unfrozen: trainable, dropout as the tape.
  /// A no-op without an encoder. New models start unfrozen.
  void set_encoder_frozen(bool frozen);
  bool encoder_frozen() const { return encoder_frozen_; }

  /// Predicted speedups ŷ: [B] (speedup ×; ln(speedup) when config().log_output), in datapoint
  /// order, for one batch of S segments (data::BatchTensors; trees[s] is segment s's tree; model-
  /// spec §5.4). bt.comp [Σ C_b, 910], bt.loops [Σ L_b, 8], bt.expr [Σ C_p, 66, 11] with
  /// bt.program_of [B]. Level-batched: the expression LSTM (and, with share_static_columns, the
  /// static part of the first MLP layer) runs once per distinct program and is broadcast with
  /// index_select; the tag BiLSTM runs once per distinct 64-value tag block of the batch (exact:
  /// no dropout there); the comp MLP runs on all computation rows at once. The segments' trees are
  /// walked as one union: comps_lstm runs once per distinct computation count over all loop nodes
  /// of all trees; the trees are walked by height (leaves first), each level running one
  /// nodes_lstm call per distinct child count and one concat MLP for all its nodes × datapoints of
  /// every segment; roots_lstm runs once per distinct root count (as DyNet's autobatching groups
  /// by signature). Dropout draws from `dropout_rng` in training mode (tape.training()). Throws
  /// std::invalid_argument when the tensors' sizes disagree with each other or the trees (a
  /// computation or loop index out of range, no roots, a cycle, not one tree per segment).
  NodeId forward(Tape<T>& tape, const data::BatchTrees& trees, const data::BatchTensors& bt,
                 Rng& dropout_rng);
  /// forward() for a batch of one segment and its tree.
  NodeId forward(Tape<T>& tape, const data::ProgramTree& tree, const data::BatchTensors& bt,
                 Rng& dropout_rng) {
    return forward(tape, data::BatchTrees{&tree}, bt, dropout_rng);
  }

  /// The inputs of forward() for batch `bt` prepared on the host once (for CUDA data placement):
  /// the same values forward(tape, trees, bt, rng) feeds its leaves, so that forward(tape, trees,
  /// inputs, rng) gives bit-identical results, also when the inputs were copied to a CUDA device
  /// (inputs.device). Throws as check_batch, and std::logic_error for a model with a pre-trained
  /// encoder (model.encoder; those keep the per-step path).
  ForwardInputs<T> prepare_inputs(const data::BatchTrees& trees,
                                  const data::BatchTensors& bt) const;
  ForwardInputs<T> prepare_inputs(const data::ProgramTree& tree,
                                  const data::BatchTensors& bt) const {
    return prepare_inputs(data::BatchTrees{&tree}, bt);
  }
  /// The per-program part of the forward that no schedule changes (lcm-serve's program cache):
  /// for every program of `bt`, the first computation-MLP layer's schedule-independent rows
  /// W0·[static columns | expression embedding] without the bias, [Σ C_p, H0] row-major in the
  /// batch's program order (H0 = comp_embed_layer_sizes[0]); the expression LSTM runs here.
  /// Evaluated in eval mode without gradients on `tape` (cleared first; a CUDA tape computes on
  /// its device and the rows come back to the host). Any datapoint of a program gives the same
  /// rows (its static columns). Throws std::logic_error for a model with a pre-trained encoder,
  /// and as check_batch.
  std::vector<T> program_rows(Tape<T>& tape, const data::BatchTrees& trees,
                              const data::BatchTensors& bt);
  /// program_rows() computed `max_rows` computation rows at a time (the tape cleared between
  /// them), so that the forward's memory is that of `max_rows` computations whatever the
  /// program's size (lcm-serve's memory bound). Each row's value is that of program_rows(): a
  /// computation's expression LSTM and first-layer row do not depend on the other rows.
  /// max_rows ≤ 0: all at once.
  std::vector<T> program_rows(Tape<T>& tape, const data::BatchTrees& trees,
                              const data::BatchTensors& bt, int64_t max_rows);
  /// prepare_inputs() with the shared first-layer path taken whatever the batch (also for one
  /// datapoint) and, when `rows` is not null, each program's rows given ([Σ C_p, H0],
  /// program_rows() of the same programs in the same order) in place of the expression and static
  /// leaves: forward() then runs only the schedule-dependent part. Same result as forward(tape,
  /// trees, bt, rng) up to float rounding. Throws std::invalid_argument when `rows` has another
  /// size, and as prepare_inputs().
  ForwardInputs<T> prepare_shared_inputs(const data::BatchTrees& trees,
                                         const data::BatchTensors& bt,
                                         const std::vector<T>* rows) const;

  /// The columns of comp_embedding_layers.0.weight that the shared path multiplies with each
  /// row's schedule columns and tag embedding: [H0, 82 + 2·lstm_embedding_size] row-major, for
  /// ForwardInputs::sched_weight (host values; the weights must be on the host or copied back).
  std::vector<T> schedule_weight() const;

  /// forward() over prepared inputs (host values, or device values on a CUDA tape, viewed without
  /// a copy: they must stay unchanged until the tape is cleared). Returns ŷ [B] as forward().
  /// Throws std::invalid_argument when `inputs` disagree with `trees` or are incomplete,
  /// std::logic_error for device inputs on a CPU tape or a model with an encoder.
  NodeId forward(Tape<T>& tape, const data::BatchTrees& trees, const ForwardInputs<T>& inputs,
                 Rng& dropout_rng);
  NodeId forward(Tape<T>& tape, const data::ProgramTree& tree, const ForwardInputs<T>& inputs,
                 Rng& dropout_rng) {
    return forward(tape, data::BatchTrees{&tree}, inputs, dropout_rng);
  }

  /// forward() in eval mode on a CPU tape for inputs of one program (prepare_shared_inputs with
  /// its program rows: one segment, `tree` its tree), computing only what `memo` (that program's,
  /// for this model's weights) does not hold: computation rows, loop-tree nodes and outputs whose
  /// inputs are bit-identical to ones computed before are taken from it, the rest computed with
  /// forward()'s ops (on fewer rows) and added to it. Returns ŷ [B] on the host. The memo is
  /// emptied first when it holds more than memo.max_bytes. Throws std::logic_error on another
  /// tape or model kind, std::invalid_argument for other inputs (and as check_tree).
  std::vector<T> forward_memo(Tape<T>& tape, const data::ProgramTree& tree,
                              const ForwardInputs<T>& inputs, ForwardMemo& memo);
  /// Rounds every weight matrix (the linear layers' `.weight` and the LSTMs' `weight_ih` /
  /// `weight_hh`) to BF16 in place and keeps their BF16 bits (Parameter::bf16) for the one-row
  /// products of eval-mode CPU forwards without gradients (engine/bf16.hpp: half the bytes read,
  /// FP32 sums); biases and the other parameters stay FP32. Products of more rows read the
  /// rounded FP32 values. Irreversible for this model; a copy of it keeps the rounded values
  /// without the bits. Idempotent. Throws std::logic_error for T = double.
  void use_bf16_weights();
  /// Whether this model holds BF16 copies (use_bf16_weights() ran on it, not on a model it was
  /// copied from).
  bool bf16_weights() const {
    const Parameter<T>* p = store_.find("predict.weight");
    return p && !p->bf16.bits.empty();
  }

  /// Whether forward_memo's answer for one datapoint of a program of `n_comps` computations over
  /// `tree` is forward()'s bit for bit: this model's sizes run its products of up to
  /// ops::detail::kGemvRows rows row by row (memo_sizes_match_forward, computed once per model)
  /// and every product of forward() for that datapoint has at most kGemvRows rows (the
  /// computation rows, the nodes of a tree level), so each row is computed by the same one-row
  /// kernel as in forward_memo's products over fewer rows; a larger product runs the packed GEMM
  /// kernel, whose rounding differs. With `points` > 1: whether a forward of that many datapoints
  /// of the program runs every product row by row too (points·n_comps rows, points × each tree
  /// level's nodes), so that each datapoint's answer is that of its own one-datapoint forward
  /// (lcm-serve's batching of concurrent connections). Throws as check_tree for a tree that is
  /// not one.
  bool memo_matches_forward(const data::ProgramTree& tree, int64_t n_comps,
                            int64_t points = 1) const;

  /// The datapoint slices that forward_parts() scores a batch of B datapoints in: ⌈B / 64⌉ of
  /// them (at most 8, at least 1), of ⌈B / parts⌉ datapoints each but the last. A function of B
  /// only, so that an answer never depends on the thread count.
  static int inference_parts(int64_t batch);

  /// ŷ [B] on the host: forward() in eval mode on the CPU for a batch of one segment and one
  /// program (an autoscheduler query: `tree` its tree), its datapoints split into
  /// inference_parts(B) consecutive slices forwarded concurrently on up to num_threads() OpenMP
  /// threads, one tape each (`tape`, cleared, for the calling thread; a tape of the worker
  /// thread's own for the others; the parameters are only read). The ops of a slice run on its
  /// thread alone, so two threads share the work of a query instead of the few products large
  /// enough to split. `program_rows` (nullable): the program's rows of program_rows(), taken
  /// through prepare_shared_inputs() for every slice, with `sched_weight` (nullable,
  /// schedule_weight()'s values) as ForwardInputs::sched_weight; when null and the batch has more
  /// than one slice, they are computed once here for all slices (ModelConfig::share_static_columns
  /// and static columns equal across the batch; else each slice runs forward() on its own). The
  /// values differ from one forward() over the whole batch only by float rounding (products over
  /// fewer rows, the shared first layer's split by columns). One slice: forward() itself.
  /// Throws std::logic_error for a CUDA tape or a model with a pre-trained encoder, and as
  /// forward() / prepare_shared_inputs().
  std::vector<T> forward_parts(Tape<T>& tape, const data::ProgramTree& tree,
                               const data::BatchTensors& bt, const std::vector<T>* program_rows,
                               const T* sched_weight = nullptr);

  /// The plain reference evaluation (for tests): per-datapoint expression embedding (bt.expr
  /// repeated via program_of) and the node-by-node recursion of model-spec §5.4, batch B_s per
  /// node, segment by segment (predictions concatenated in datapoint order). Same result as
  /// forward() up to float rounding (and dropout masks). Same errors as forward().
  NodeId forward_naive(Tape<T>& tape, const data::BatchTrees& trees, const data::BatchTensors& bt,
                       Rng& dropout_rng);
  NodeId forward_naive(Tape<T>& tape, const data::ProgramTree& tree, const data::BatchTensors& bt,
                       Rng& dropout_rng) {
    return forward_naive(tape, data::BatchTrees{&tree}, bt, dropout_rng);
  }

 private:
  /// The computation embeddings X: [Σ C_b, E] (steps 1–4 of §5.4).
  NodeId comp_embeddings(Tape<T>& tape, const data::BatchTensors& bt, const data::BatchLayout& lay,
                         Rng& rng, bool naive);
  /// Host side of prepare_inputs (level-batched, or the naive layout), without the checks.
  ForwardInputs<T> prepare(const data::BatchTensors& bt, const data::BatchLayout& lay, bool naive,
                           bool force_share = false, const std::vector<T>* rows = nullptr) const;
  /// The z0 columns of the first-layer weight that schedule_weight() and the shared path select.
  std::vector<int64_t> schedule_weight_columns() const;
  /// The expression LSTM's final hidden state per Expr row: [rows, expr_embed_size].
  NodeId expression_embedding(Tape<T>& tape, const ForwardInputs<T>& in);
  /// The shared path's per-program rows W0·[Static | expression embedding] [Σ C_p, H0].
  NodeId static_rows(Tape<T>& tape, const ForwardInputs<T>& in);
  /// Steps 1–4 of §5.4 on prepared inputs: X [Σ C_b, E].
  NodeId embed_computations(Tape<T>& tape, const ForwardInputs<T>& in, Rng& rng);
  /// Step 2 of §5.4: the tag BiLSTM's [forward h_T | backward h after step 0] per computation
  /// row, [Σ C_b, 2·lstm_embedding_size].
  NodeId tag_embeddings(Tape<T>& tape, const ForwardInputs<T>& in);
  /// Step 3 of §5.4 with the static columns once per program: W0_sched·[Sched | tags] + b0 plus
  /// each row's program row (static_rows or the ProgramRows leaf), [Σ C_b, H0].
  NodeId shared_first_layer(Tape<T>& tape, const ForwardInputs<T>& in, NodeId tags, NodeId w0,
                            NodeId b0);
  /// Step 3 of §5.4 row by row: W0·[first | tags | third | expression embedding] + b0.
  NodeId whole_first_layer(Tape<T>& tape, const ForwardInputs<T>& in, NodeId tags, NodeId w0,
                           NodeId b0);
  /// Layers 1..n-1 of the computation MLP (Linear → ELU → Dropout) on the first layer's output.
  NodeId comp_mlp(Tape<T>& tape, NodeId h, Rng& rng);
  /// Steps 5–7 of §5.4, level-batched over the union of the segments' trees: computation
  /// embeddings X [Σ C_b, E] and loop vectors [Σ L_b, 8] → ŷ [B].
  NodeId walk_tree(Tape<T>& tape, const data::BatchTrees& trees,
                   const std::vector<data::BatchSegment>& segments, NodeId X, NodeId loops,
                   Rng& rng);
  /// The level-batched walk's index and LSTM outputs (model/cost_model_tree.cpp).
  struct TreeWalk;
  /// comps_lstm over the computations of every loop node that has some, one call per
  /// computation count; fills w.comp_sources and w.comp_loc.
  void walk_computations(Tape<T>& tape, TreeWalk& w, NodeId X);
  /// The embeddings of the nodes of height h: nodes_lstm over their children (one call per child
  /// count), then [H_nodes | H_comps | loop vector] through the concat layers; fills w.emb_*.
  void walk_level(Tape<T>& tape, TreeWalk& w, size_t h, NodeId loops, Rng& rng);
  /// roots_lstm over each segment's roots (one call per root count): [B, E] in datapoint order.
  NodeId walk_roots(Tape<T>& tape, TreeWalk& w);
  /// NodeEmb(v) of §5.4 step 5 for forward_naive, children first, batch B: [B, E]; X [B, C, E],
  /// lp the loop vectors [B, L, 8].
  NodeId naive_node(Tape<T>& tape, const data::ProgramTree& tree, int v, NodeId X, NodeId lp,
                    Rng& rng);
  /// Regression head on the roots_lstm final hidden h: [B, E] → ŷ [B] (step 7).
  NodeId head(Tape<T>& tape, NodeId h, int64_t batch, Rng& rng);
  /// Linear → ELU → Dropout(p).
  NodeId dense(Tape<T>& tape, NodeId x, const char* prefix, int index, double p, Rng& rng);

  /// [Σ C_b, first-layer width] inputs of the first MLP layer with the §8 encoder.
  NodeId encoder_features(Tape<T>& tape, const data::BatchTensors& bt, const data::BatchLayout& lay,
                          Rng& rng);

  ModelConfig cfg_;
  ParameterStore<T> store_;
  bool encoder_frozen_ = false;
  bool memo_sizes_ok_ = false;  // memo_sizes_match_forward(cfg_), set by the constructor
  // use_bf16_weights: the BF16 bits of schedule_weight(), read with ForwardInputs::sched_weight
  Bf16Copy sched_weight_bf16_;
};

/// Throws std::invalid_argument naming the problem when `bt` is inconsistent with itself
/// (data::batch_layout) or with `trees` (one per segment; index ranges against the segment's C and
/// L; tree shape: at least one root, no node reached twice from the roots, no cycle). Nodes that
/// no root reaches are ignored by both forwards, as by the reference recursion. Returns the
/// batch's layout.
data::BatchLayout check_batch(const data::BatchTrees& trees, const data::BatchTensors& bt);
/// check_batch for a batch of one segment.
void check_batch(const data::ProgramTree& tree, const data::BatchTensors& bt);

/// The per-model half of CostModel::memo_matches_forward: whether the products of a model of
/// `cfg` with up to ops::detail::kGemvRows rows run the one-row kernel row by row
/// (engine/ops/gemm.hpp: the weight operand holds at least kGemvMinOperand values): the first
/// layer's schedule columns (column_split's 82), the computation and regression MLPs, the concat
/// MLP, the tree LSTMs (4E × E) and the tag BiLSTM (4·lstm_embedding_size × 16 and × itself). A
/// smaller model (e.g. the tests' comp layers 32,16) runs the packed GEMM on 2–8 rows, whose
/// rounding depends on the row count, so its memo would not give forward()'s bits. The 16×16
/// encode_vectors product is not counted: it runs the packed kernel in every model (its equality
/// with a whole forward is checked over the real valid sample, tests/test_serve_memo.cpp).
/// CostModel computes it once, at construction.
bool memo_sizes_match_forward(const ModelConfig& cfg);

extern template class CostModel<float>;
extern template class CostModel<double>;

}  // namespace lcm::model
