// Training memory estimates from the configured sizes (see training_memory.hpp).
#include "model/training_memory.hpp"

#include <cstdio>
#include <numeric>

#include "data/features.hpp"
#include "engine/lstm.hpp"
#include "engine/parameter.hpp"
#include "engine/rng.hpp"

namespace lcm::model {

namespace {

constexpr size_t kF = sizeof(float);

/// Weights of a PyTorch nn.LSTM of `layers` layers: per direction and layer W_ih [4H, in],
/// W_hh [4H, H] and two biases [4H].
int64_t lstm_count(int64_t in, int64_t h, int64_t layers = 1, bool bidirectional = false) {
  const int64_t dirs = bidirectional ? 2 : 1;
  int64_t n = 0;
  for (int64_t l = 0; l < layers; ++l) {
    const int64_t x = l == 0 ? in : dirs * h;
    n += dirs * (4 * h * x + 4 * h * h + 8 * h);
  }
  return n;
}

int64_t linear_count(int64_t in, int64_t out) {
  return in * out + out;
}

/// The encoder's weights (model.encoder; fixed release sizes, so its store is small to build).
int64_t encoder_count(const AutoencoderConfig& ac) {
  ParameterStore<float> s;
  Rng rng(1);
  add_encoder_parameters(s, ac, rng);
  return s.count();
}

TrainingMemory from_counts(int64_t params, size_t activations) {
  TrainingMemory m;
  m.parameter_count = params;
  m.parameters = size_t(params) * kF;
  m.gradients = size_t(params) * kF;
  m.optimizer_state = 2 * size_t(params) * kF;  // Adam's first and second moments
  m.activations = activations;
  return m;
}

}  // namespace

TrainingMemory model_state_memory(int64_t parameter_count) {
  return from_counts(parameter_count, 0);
}

std::string TrainingMemory::str() const {
  constexpr double g = double(size_t(1) << 30);
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "%.2f GiB (parameters %.2f GiB, gradients %.2f GiB, Adam state %.2f GiB, "
                "activations of one batch %.2f GiB)",
                double(total()) / g, double(parameters) / g, double(gradients) / g,
                double(optimizer_state) / g, double(activations) / g);
  return buf;
}

int64_t cost_model_parameter_count(const ModelConfig& mc) {
  const std::vector<int>& s = mc.comp_embed_layer_sizes;
  const int64_t E = mc.embed_size(), n = int64_t(s.size());
  int64_t p = 2 * E;  // no_comps_tensor, no_nodes_tensor
  int64_t in = mc.input_size + 2 * mc.lstm_embedding_size + mc.expr_embed_size;
  if (mc.encoder.kind == EncoderKind::None) {
    p += linear_count(data::kMaxTags, data::kMaxTags);
    p += lstm_count(data::kMaxTags, mc.lstm_embedding_size, 1, true);
    p += lstm_count(data::kExprNodeWidth, mc.expr_embed_size);
  } else {
    p += encoder_count(mc.encoder);
    in = mc.encoder.kind == EncoderKind::CompVector
             ? mc.encoder.embedding_width()
             : 207 + mc.encoder.embedding_width() + data::kMaxExprLen * data::kExprNodeWidth;
  }
  for (int64_t i = 0; i < n; ++i) {
    p += linear_count(in, s[size_t(i)]);
    in = s[size_t(i)];
  }
  p += 3 * lstm_count(E, E);  // comps_lstm, nodes_lstm, roots_lstm
  if (n >= 2) {
    p += linear_count(2 * E + mc.loops_tensor_size, s[size_t(n - 2)]) +
         linear_count(s[size_t(n - 2)], s[size_t(n - 1)]);  // concat_layers
    p += linear_count(E, s[size_t(n - 2)]) +
         linear_count(s[size_t(n - 2)], s[size_t(n - 1)]);  // regression_layers
  }
  p += linear_count(E, 1);  // predict
  return p;
}

TrainingMemory estimate_training_memory(const ModelConfig& mc, int64_t batch_size) {
  const size_t layers = size_t(
      std::accumulate(mc.comp_embed_layer_sizes.begin(), mc.comp_embed_layer_sizes.end(), 0));
  const size_t first_in = size_t(mc.input_size + 2 * mc.lstm_embedding_size + mc.expr_embed_size);
  const size_t E = size_t(mc.embed_size()), ht = size_t(mc.lstm_embedding_size),
               ex = size_t(mc.expr_embed_size);
  // per computation row (values; ×2 below for their gradients): the 910 columns, the first
  // layer's input, each layer's output, activation and dropout mask, the tag BiLSTM's gates and
  // states over its 4 steps in 2 directions
  size_t per_comp = data::kCompVectorWidth + first_in + 3 * layers + 2 * 4 * 10 * ht;
  // per program (charged per datapoint: a batch may hold as many programs as datapoints): the
  // expression LSTM over 66 steps, or the encoder's forward
  per_comp += size_t(data::kMaxExprLen) * 10 * ex + data::kMaxExprLen * data::kExprNodeWidth;
  if (mc.encoder.kind != EncoderKind::None) per_comp += 16 * size_t(mc.encoder.input_width());
  // per loop: the tree LSTM cells (gates 4E, states) and the concat / regression layers
  const size_t per_loop = 24 * E + 3 * layers + size_t(mc.loops_tensor_size);
  const double values = double(batch_size) * (kEstimateCompsPerDatapoint * double(per_comp) +
                                              kEstimateLoopsPerDatapoint * double(per_loop));
  return from_counts(cost_model_parameter_count(mc), size_t(2.0 * values * double(kF)));
}

TrainingMemory estimate_pretraining_memory(const AutoencoderConfig& ac, int64_t batch_size) {
  const int64_t enc = encoder_count(ac);
  int64_t dec = 0;
  size_t per_sample = 0;
  if (ac.kind == EncoderKind::CompVector) {
    const CompVectorAeSizes& z = ac.comp;
    dec = linear_count(z.embedding, z.decoder_hidden0) +
          linear_count(z.decoder_hidden0, z.decoder_hidden1) +
          linear_count(z.decoder_hidden1, ac.input_width());
    per_sample = size_t(2 * ac.input_width()) + size_t(z.concat_width()) * 3 +
                 size_t(z.bottleneck_hidden + z.embedding) * 3 +
                 9 * 2 * 10 * size_t(z.tags_hidden) +
                 size_t(data::kMaxExprLen) * 10 * size_t(z.expr_hidden) +
                 size_t(z.decoder_hidden0 + z.decoder_hidden1) * 3 + 15 * 3 * size_t(z.read);
  } else {
    dec = linear_count(ac.embedding_width(), ac.input_width());
    per_sample = size_t(2 * ac.input_width()) + size_t(ac.embedding_width()) * 3 +
                 16 * 2 * 10 * size_t(ac.access.hidden);
  }
  return from_counts(enc + dec, size_t(2.0 * double(batch_size) * double(per_sample) * double(kF)));
}

}  // namespace lcm::model
