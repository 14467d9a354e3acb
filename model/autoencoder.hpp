// The two self-supervised autoencoders of docs/model-spec.md §8 (Liu & Baghdadi, CC 2025): the
// computation-vector autoencoder (§8.1, 1636 → 350 linear bottleneck) and the access-matrix LSTM
// autoencoder (§8.2, 2-layer BiLSTM over 16 access steps), their inputs, and their encoders.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/parameter.hpp"
#include "engine/rng.hpp"
#include "engine/tape.hpp"
#include "model/options.hpp"

namespace lcm::model {

// ---- inputs (model-spec §3.2, §3.10, §8.1, §8.2) ----
/// Width of the §8.1 autoencoder input: [910-wide computation vector | 66×11 expression].
constexpr int kCompAeInputWidth = 1636;
/// Steps and step width of the §8.2 access sequence (write access + 15 read accesses, 44 each).
constexpr int kAccessSteps = 16;
constexpr int kAccessStepWidth = 44;
constexpr int kAccessInputWidth = kAccessSteps * kAccessStepWidth;  // 704

/// model-spec §3.10 ([PCV] thresholding): x if |x| < 10, else sign(x)·log10(|x|) (so 9 → 9,
/// 10 → 1, −100 → −2, 0 → 0). NaN stays NaN.
float log10_threshold(float x);

/// The §8.1 input of one computation: out[0..909] = comp (one computation's 910-wide vector,
/// §3.2), out[910..1635] = expr (its 66×11 expression rows, §3.7), every value passed through
/// log10_threshold. comp: [910], expr: [726], out: [1636] float32.
void comp_vector_ae_input(const float* comp, const float* expr, float* out);

/// The §8.2 input of one computation from its 910-wide vector: step 0 = [−1, write_buffer_id + 1,
/// 42 write-matrix values] (columns 207–249), steps 1–15 = the 15 read blocks of 44 (columns
/// 250–909, all-zero for missing accesses). No thresholding ([PAM]). comp: [910], out: [16, 44].
void access_ae_input(const float* comp, float* out);

// ---- sizes ----
/// Layer widths of the §8.1 computation-vector autoencoder (release values by default; the
/// input split and the 1636-wide input/output are fixed). Encoder: first part 33→first,
/// tags 9×16 → Linear 16→16 → BiLSTM(tags_hidden) → 2·tags_hidden, iteration domain 110→domain,
/// write block 43→write, each read block 44→read then 15·read→reads, expression LSTM(expr_hidden),
/// then Linear → bottleneck_hidden, ELU, Dropout(0.1), Linear → embedding, Dropout(0.05).
/// Decoder: embedding → decoder_hidden[0] → ELU → Dropout(0.05) → decoder_hidden[1] → ELU →
/// Dropout(0.05) → 1636.
struct CompVectorAeSizes {
  int first = 15, tags_hidden = 100, domain = 50, write = 20, read = 20, reads = 150,
      expr_hidden = 100;
  int bottleneck_hidden = 450, embedding = 350;
  int decoder_hidden0 = 600, decoder_hidden1 = 1200;
  /// Throws std::invalid_argument naming the first width < 1.
  void validate() const;
  /// Width of the concatenated block embeddings (535 at release sizes).
  int concat_width() const {
    return first + 2 * tags_hidden + domain + write + reads + expr_hidden;
  }
};

/// Sizes of the §8.2 access-matrix autoencoder: hidden size per direction (release 20); the
/// encoder output is 16 × 2·hidden (640), the decoder Linear 16·2·hidden → 704.
struct AccessAeSizes {
  int hidden = 20;
  /// Throws std::invalid_argument when hidden < 1.
  void validate() const;
  int embedding() const { return kAccessSteps * 2 * hidden; }
};

/// Both size sets plus the kind: everything that decides the parameter shapes.
struct AutoencoderConfig {
  EncoderKind kind = EncoderKind::CompVector;
  CompVectorAeSizes comp;
  AccessAeSizes access;
  /// Input / reconstruction width: 1636 or 704. Throws std::invalid_argument for kind None.
  int input_width() const;
  /// Encoder output width: comp.embedding (350) or access.embedding() (640).
  int embedding_width() const;
  /// JSON text {"kind": ..., sizes...} (checkpoint metadata "lcm.autoencoder").
  std::string to_json() const;
  /// Parses to_json's text. Throws std::runtime_error naming the bad field.
  static AutoencoderConfig from_json(const std::string& text);
};

/// The config of "no encoder" (kind None; the sizes are unused).
inline AutoencoderConfig no_encoder() {
  AutoencoderConfig c;
  c.kind = EncoderKind::None;
  return c;
}

// ---- encoder parameters and forward (shared with the cost model, model-spec §8) ----
/// Adds the encoder's parameters to `store` under "encoder.*" in the state_dict order of
/// bench/reference/autoencoder_model.py, initialised like PyTorch's defaults (nn.Linear, nn.LSTM)
/// from `rng`. CompVector: encoder.first_part, encoder.encode_vectors,
/// encoder.transformation_vectors_embed (BiLSTM), encoder.domain, encoder.write_access,
/// encoder.read_access, encoder.read_accesses, encoder.exprs_embed, encoder.bottleneck.{0,1}
/// (.weight/.bias). AccessMatrix: encoder.{weight,bias}_{ih,hh}_l{0,1}[_reverse] (the names of the
/// published [PAM] weights). Throws std::invalid_argument for kind None or a duplicate name.
template <class T>
void add_encoder_parameters(ParameterStore<T>& store, const AutoencoderConfig& cfg, Rng& rng);

/// Encodes n input rows. rows: [n, 1636] (CompVector, already log10-thresholded) or [n, 16, 44]
/// (AccessMatrix), float32 host memory. Returns a node [n, 350] / [n, 640] (release sizes).
/// CompVector: the intended per-sample [forward | backward] BiLSTM concatenation (Q7, not the
/// reference's reshape bug). AccessMatrix: the top layer's full output sequence, flattened.
/// Rows whose tag block / expression / access sequence are identical are encoded once and
/// broadcast with index_select (exact: these paths have no dropout). `dropout` = false turns the
/// bottleneck's dropout off (eval mode of a frozen encoder); it is also off when !tape.training().
/// Throws std::invalid_argument for n < 1, kind None, or a missing/mis-shaped parameter.
template <class T>
NodeId encode(Tape<T>& tape, ParameterStore<T>& store, const AutoencoderConfig& cfg,
              const float* rows, int64_t n, bool dropout, Rng& dropout_rng);

/// A whole autoencoder (encoder + decoder) with its parameters, T = float (training) or double
/// (gradient checks). Decoder parameter names: CompVector decoder.{0,1,2}.weight/bias,
/// AccessMatrix decoder.weight/bias (as the published file).
template <class T>
class Autoencoder {
 public:
  /// Creates and initialises every parameter from lcm::Rng(seed) (PyTorch defaults, encoder
  /// first). Throws std::invalid_argument for kind None or bad sizes.
  Autoencoder(const AutoencoderConfig& cfg, uint64_t seed);

  ParameterStore<T>& params() { return store_; }
  const ParameterStore<T>& params() const { return store_; }
  const AutoencoderConfig& config() const { return cfg_; }

  /// The reconstruction [n, input_width] of n rows (layout as encode()). Dropout (training mode
  /// only): the encoder bottleneck's and the decoder's (CompVector), Dropout(0.05) on the
  /// flattened encoder output (AccessMatrix).
  NodeId reconstruct(Tape<T>& tape, const float* rows, int64_t n, Rng& dropout_rng);
  /// MSE between reconstruct() and the rows themselves (model-spec §8: all entries equally
  /// weighted) → scalar.
  NodeId loss(Tape<T>& tape, const float* rows, int64_t n, Rng& dropout_rng);
  /// Masked-feature reconstruction (the masked inputs of BERT, Devlin et al. 2019, applied to
  /// the §8 inputs; docs/accuracy.md, issue 46): the rows with the entries of `mask` set to 0 are
  /// reconstructed, and the loss is the MSE over the masked entries only,
  /// Σ_{mask} (rec − row)² / |mask| → scalar. rows: [n, input_width] as reconstruct(); mask:
  /// [n · input_width], 1 = masked (e.g. draw_mask). Throws std::invalid_argument when the sizes
  /// differ or nothing is masked.
  NodeId masked_loss(Tape<T>& tape, const float* rows, int64_t n, const std::vector<uint8_t>& mask,
                     Rng& dropout_rng);
  /// Contrastive loss between two masked views of each row (InfoNCE, van den Oord et al. 2018, in
  /// the two-view form of SimCLR, Chen et al. 2020; docs/accuracy.md, issue 46): the encoder
  /// embeds view a (rows with mask_a's entries set to 0) and view b (mask_b), each embedding is
  /// squashed by tanh, s_ij = tanh(z_a,i)·tanh(z_b,j) / (E·temperature) with E the embedding
  /// width (a similarity in (−1/τ, 1/τ): the bounded stand-in for SimCLR's cosine), and the loss
  /// is the mean of the cross-entropies of row i's softmax over j against its positives, both
  /// directions (a→b, b→a) averaged → scalar. The positives of row i are the rows whose input
  /// equals row i's (identical computations of a batch are not negatives), each weighted alike.
  /// The decoder is not used. rows, masks as masked_loss; n ≥ 2 (a batch of one has no
  /// negatives: 0, no gradient). Throws std::invalid_argument for other sizes or temperature ≤ 0.
  NodeId contrastive_loss(Tape<T>& tape, const float* rows, int64_t n,
                          const std::vector<uint8_t>& mask_a, const std::vector<uint8_t>& mask_b,
                          double temperature, Rng& dropout_rng);

 private:
  AutoencoderConfig cfg_;
  ParameterStore<T> store_;
};

/// A mask over `entries` input values for masked_loss / contrastive_loss: each entry is 1
/// (masked) with probability `rate` (independent Bernoulli draws from `rng`, in entry order);
/// every row of `width` entries gets at least one masked entry (the first draw of the row is
/// forced when none came up), so the masked MSE is always defined. Throws std::invalid_argument
/// for rate outside (0, 1) or width < 1 or entries not a multiple of width.
std::vector<uint8_t> draw_mask(int64_t entries, int64_t width, double rate, Rng& rng);

extern template class Autoencoder<float>;
extern template class Autoencoder<double>;

}  // namespace lcm::model
