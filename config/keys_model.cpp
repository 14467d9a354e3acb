// The key rows of model.* sizes, the pre-trained encoder and pretrain.* (config/key_rows.hpp).
#include "config/key_rows.hpp"

namespace lcm::config::key_rows {

/// The rows of model.*: the cost model sizes (docs/model-spec.md §5.1).
void add_model_size_keys(std::vector<ConfigKey>& k) {
  k.push_back(refuse(
      number_list_key<int>(LCM_KEY(model.comp_embed_layer_sizes), "600,350,200,180",
                           "computation-MLP widths, comma-separated, >= 2 entries; the last is the "
                           "embedding size (model-spec §5.1)")));
  k.push_back(refuse(number_list_key<double>(
      LCM_KEY(model.drops), "0.05,0.05,0.05,0.05,0.05",
      "dropout probabilities, comma-separated, one per computation-MLP layer "
      "(and >= 2)")));
  k.push_back(refuse(int_key(LCM_KEY(model.lstm_embedding_size), "100", 1,
                             "hidden size per direction of the transformation-tag BiLSTM")));
  k.push_back(refuse(
      int_key(LCM_KEY(model.expr_embed_size), "100", 1, "hidden size of the expression LSTM")));
}

/// The rows of the pre-trained encoder (model-spec §8) and pretrain.*.
void add_pretraining_keys(std::vector<ConfigKey>& k) {
  using lcm::model::EncoderKind;
  k.push_back(
      refuse(enum_key(LCM_KEY(model.encoder), "none",
                      "pre-trained encoder of the computation vectors (model-spec §8): none = the "
                      "§5 model; needs model.encoder_weights")));
  k.push_back(
      string_key(LCM_KEY(model.encoder_weights), "",
                 "autoencoder checkpoint for model.encoder (lcm-pretrain's best_autoencoder_"
                 "<name>.safetensors or the published access-matrix file)"));
  k.push_back(
      int_key(LCM_KEY(training.fine_tune_epoch), "120", 0,
              "epoch (0-based) from which the pre-trained encoder is unfrozen and fine-tuned "
              "(model-spec §8; reference 120); >= max_epochs keeps it frozen"));
  k.push_back(double_key(LCM_KEY(training.fine_tune_lr), "0.0002", 0.0, true,
                         "learning rate of the encoder's own optimizer while fine-tuning "
                         "(model-spec §8; reference 2e-4)"));
  k.push_back(refuse(string_key(
      LCM_KEY(training.init_weights), "",
      "cost-model checkpoint (lcm-train's best_model_<name>.safetensors) whose weights start "
      "the run instead of a random initialisation, e.g. a model trained on lcm-synth programs "
      "(docs/accuracy.md, pre-training); same model.* sizes; its feature settings are adopted; "
      "\"\" = random")));
  k.push_back(refuse(enum_key(
      LCM_KEY(training.init_scaling), "checkpoint",
      "with training.init_weights: checkpoint = keep its input scaling (the statistics its "
      "weights learned on); refit = fit model.input_scaling on this run's training split")));
  k.push_back(enum_key(LCM_KEY(pretrain.kind), "comp_vector",
                       "lcm-pretrain: which autoencoder (model-spec §8.1 / §8.2)",
                       {EncoderKind::CompVector, EncoderKind::AccessMatrix}));
  k.push_back(
      {"pretrain.files", "a comma-separated list of files (\"[a,b]\" accepted)",
       "lcm-pretrain: LOOPerSet files, comma-separated (\"[a,b]\" accepted); labels are not used",
       "", OnResume::Free,
       [](Config& c, const std::string& v) {
         std::vector<std::string> files;
         for (std::string& f : split_list(v))
           if (!f.empty()) files.push_back(std::move(f));
         c.pretrain.files = std::move(files);
       },
       [](const Config& c) {
         std::string s;
         for (const auto& f : c.pretrain.files) s += (s.empty() ? "" : ",") + f;
         return s;
       },
       true});
  k.push_back(
      int_key(LCM_KEY(pretrain.epochs), "50", 1, "lcm-pretrain: epochs (reference 200 / 700)"));
  k.push_back(int_key(LCM_KEY(pretrain.batch_size), "256", 1,
                      "lcm-pretrain: samples per batch (reference 256)"));
  k.push_back(double_key(LCM_KEY(pretrain.lr), "0.0001", 0.0, true,
                         "lcm-pretrain: Adam learning rate (reference 1e-4)"));
  k.push_back(double_key(LCM_KEY(pretrain.valid_fraction), "0.1", 0.0, false,
                         "lcm-pretrain: share of programs held out for validation (< 1)", 1.0));
  k.push_back(
      int_key(LCM_KEY(pretrain.max_samples), "0", 0,
              "lcm-pretrain: at most this many training samples per epoch (seeded pick); 0 = all"));
  k.push_back(enum_key(LCM_KEY(pretrain.objective), "reconstruct",
                       "lcm-pretrain: reconstruct = the §8 reconstruction MSE; masked = the MSE of "
                       "input entries masked to 0 (pretrain.mask_rate); contrastive = InfoNCE "
                       "between two masked views of each computation (docs/accuracy.md)"));
  k.push_back(double_key(LCM_KEY(pretrain.mask_rate), "0.15", 0.0, true,
                         "lcm-pretrain, objective masked or contrastive: share of the input "
                         "entries masked (< 1)",
                         1.0));
  k.push_back(double_key(LCM_KEY(pretrain.temperature), "0.1", 0.0, true,
                         "lcm-pretrain, objective contrastive: softmax temperature of the "
                         "similarities"));
}

}  // namespace lcm::config::key_rows
