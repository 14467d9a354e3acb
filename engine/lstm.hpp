// The LSTM as one fused, differentiable op with torch.nn.LSTM semantics (batch-first, zero initial
// state, gate order i, f, g, o, two biases, multi-layer, bidirectional), its PyTorch-named
// parameters, and the helper that turns those parameters into tape nodes. CPU: engine/ops/lstm.cpp.
#pragma once
#include <string>
#include <vector>

#include "engine/parameter.hpp"
#include "engine/rng.hpp"
#include "engine/tape.hpp"

namespace lcm {

/// Geometry of an LSTM, as torch.nn.LSTM(input_size, hidden_size, num_layers, bidirectional,
/// batch_first=True). Every extent must be ≥ 1.
struct LstmSpec {
  int input_size = 0;
  int hidden_size = 0;
  int num_layers = 1;
  bool bidirectional = false;
  /// Number of directions D (1 or 2).
  int directions() const { return bidirectional ? 2 : 1; }
  /// Input width of layer l: input_size for l = 0, D·hidden_size above.
  int layer_input_size(int l) const { return l == 0 ? input_size : directions() * hidden_size; }
};

/// Node ids of one layer-direction's weights (PyTorch layout, gate order i, f, g, o):
/// w_ih [4H, In_l], w_hh [4H, H], b_ih [4H], b_hh [4H].
struct LstmWeights {
  NodeId w_ih = -1, w_hh = -1, b_ih = -1, b_hh = -1;
};

/// The three results of ops::lstm (all differentiable; gradients from any subset are correct).
struct LstmOutputs {
  NodeId output = -1;  ///< [B, T, D·H]: top layer's h_t per step, [forward | backward] per step.
  NodeId h_n =
      -1;  ///< [L·D, B, H]: final hidden per layer-direction, PyTorch order (l0, l0_rev, l1, ...).
  NodeId c_n =
      -1;  ///< [L·D, B, H]: final cell state, same order. The reverse direction's is after step 0.
};

namespace ops {

/// Fused LSTM forward (records one backward through time). torch.nn.LSTM semantics
/// (PyTorch docs, docs/model-spec.md §5.2/§8.2): zero initial h, c;
///   gates = x_t·W_ihᵀ + b_ih + h_{t−1}·W_hhᵀ + b_hh;  i, f, o = σ(·), g = tanh(·);
///   c_t = f⊙c_{t−1} + i⊙g;  h_t = o⊙tanh(c_t).
/// The reverse direction runs t = T−1..0; layer l > 0 reads the previous layer's full output.
/// x: [B, T, In] (batch-first, B ≥ 1, T ≥ 1, In == spec.input_size), float or double;
/// w: spec.num_layers·D entries in the order l0, l0_reverse, l1, l1_reverse, ...
/// Cost: per step the recurrent GEMM [B, H]×[H, 4H] (skipped at the first step, where h = 0) and
/// one fused element-wise pass, per block of batch rows (1, 2 or 4 blocks by B, never by thread
/// count; blocks run on the OpenMP threads of lcm::set_num_threads when a step has ≥ 50 MFLOP).
/// Input projections: one GEMM [B·T, In_l]×[In_l, 4H] per layer-direction below B = 1024, else per
/// step and block. Backward through time by hand: per step one fused element-wise pass and dh_{t−1}
/// = dG_t·W_hh; dW_ih, dW_hh and dX as one GEMM each over the stacked steps, or, from B = 1024 with
/// 4H·(In_0 + H) ≥ 16384, per step and block while the block's gate gradients are in cache (x, the
/// output and their gradients are then read and written batch-first, in place). Deterministic:
/// bit-identical results for any thread count. The three outputs are views of one packed node (no
/// copies); gradients from any subset are exact. Memory (arena): ≈ L·D·B·T·6H values saved for the
/// backward, plus the outputs. Throws std::invalid_argument (naming the shapes) on a bad spec, x
/// shape, weight count or weight shape; std::logic_error from the dispatch point (CUDA backend not
/// built, or devices mixed). On a CUDA tape with all inputs on the device it runs the CUDA twin
/// (kernels/lstm.cu + cuBLAS GEMMs).
template <class T>
LstmOutputs lstm(Tape<T>& t, NodeId x, const LstmSpec& spec, const std::vector<LstmWeights>& w);

}  // namespace ops

/// Adds the parameters of an LSTM to `store` with torch.nn.LSTM's state_dict names and order:
/// for each layer l and direction (suffix "" or "_reverse"): <prefix>.weight_ih_l<l><sfx> [4H,
/// In_l], .weight_hh_l<l><sfx> [4H, H], .bias_ih_l<l><sfx> [4H], .bias_hh_l<l><sfx> [4H] (In_l: see
/// LstmSpec::layer_input_size). An empty prefix gives the bare names ("weight_ih_l0").
/// With `rng` the values are drawn like PyTorch's default init, uniform ±1/√H (model-spec §5.3);
/// without, they stay zero. Throws std::invalid_argument on a bad spec or a duplicate name.
template <class T>
void add_lstm_parameters(ParameterStore<T>& store, const std::string& prefix, const LstmSpec& spec,
                         Rng* rng = nullptr);

/// The name add_lstm_parameters gives to `kind` ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
/// of layer `layer`, direction `direction` (0 forward, 1 reverse).
std::string lstm_parameter_name(const std::string& prefix, const std::string& kind, int layer,
                                int direction);

/// Tape nodes (Tape::param) for the parameters added by add_lstm_parameters, in the order ops::lstm
/// expects. Throws std::out_of_range naming a missing parameter, std::invalid_argument on a shape
/// that does not match `spec`.
template <class T>
std::vector<LstmWeights> lstm_weight_nodes(Tape<T>& t, ParameterStore<T>& store,
                                           const std::string& prefix, const LstmSpec& spec);

}  // namespace lcm
