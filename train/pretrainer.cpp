// Autoencoder pre-training behind lcm-pretrain (see pretrainer.hpp): the files prepared like
// training splits (unlabeled schedules kept), repeats across files skipped, samples split by
// program, Adam on the reconstruction MSE, best/last checkpoints and logs after every epoch.
#include "train/pretrainer.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

#include "data/dataset.hpp"
#include "data/prepare.hpp"
#include "data/reader.hpp"
#include "engine/device.hpp"
#include "engine/device_memory.hpp"
#include "engine/optim.hpp"
#include "engine/rng.hpp"
#include "engine/safetensors.hpp"
#include "engine/tape.hpp"
#include "engine/threads.hpp"
#include "model/autoencoder.hpp"
#include "train/interrupt.hpp"
#include "train/overlap.hpp"
#include "train/progress.hpp"
#include "train/report.hpp"
#include "train/run_files.hpp"
#include "train/run_state.hpp"
#include "train/seeds.hpp"
#include "train/splits.hpp"
#include "train/startup_checks.hpp"
#include "util/run_lock.hpp"

namespace lcm::train {
namespace {

using lcm::model::EncoderKind;

/// One training sample: computation `comp` of kept schedule `schedule` (comp_vector) or of the
/// program (access_matrix: schedule-independent, schedule = 0) of program `program` of file `file`.
struct Sample {
  int32_t file = 0, program = 0, schedule = 0, comp = 0;
};

/// Fills rows [end − begin, input width] for samples [begin, end) of `order`: the computation
/// vector + expression (docs/model-spec.md §8.1) or the schedule-independent access rows (§8.2).
void fill_rows(EncoderKind kind, const std::vector<lcm::data::PreparedSplit>& splits,
               const std::vector<Sample>& samples, const std::vector<int64_t>& order, int64_t begin,
               int64_t end, std::vector<float>& rows, std::vector<float>& comp_buf) {
  const int W = kind == EncoderKind::CompVector ? lcm::model::kCompAeInputWidth
                                                : lcm::model::kAccessInputWidth;
  rows.resize(size_t((end - begin) * W));
  constexpr int CW = lcm::data::kCompVectorWidth,
                XW = lcm::data::kMaxExprLen * lcm::data::kExprNodeWidth;
  for (int64_t i = begin; i < end; ++i) {
    const Sample& s = samples[size_t(order[size_t(i)])];
    const lcm::data::ProgramFeatures& p =
        splits[size_t(s.file)].dataset.programs[size_t(s.program)];
    float* out = &rows[size_t((i - begin) * W)];
    if (kind == EncoderKind::AccessMatrix) {  // access columns are schedule-independent (§3.2)
      lcm::model::access_ae_input(&p.comp_static[size_t(s.comp) * CW], out);
    } else {
      comp_buf.resize(size_t(p.n_comps) * CW);
      p.comp_vectors(s.schedule, comp_buf.data());
      lcm::model::comp_vector_ae_input(&comp_buf[size_t(s.comp) * CW], &p.expr[size_t(s.comp) * XW],
                                       out);
    }
  }
}

/// 0, 1, ..., n − 1.
std::vector<int64_t> iota(size_t n) {
  std::vector<int64_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = int64_t(i);
  return v;
}

class Pretrainer {
 public:
  Pretrainer(const config::Config& c, const PretrainOptions& o)
      : c_(c), o_(o), stop_(o.stop ? o.stop : &stop_requested()), files_(c.pretrain.files) {}

  PretrainResult run() {
    check();
    read_files();
    split_samples();
    build();
    std::printf("%6s %14s %14s %9s %12s\n", "epoch", "train_MSE", "val_MSE", "seconds",
                "samples/s");
    std::fflush(stdout);
    for (int epoch = 0; epoch < c_.pretrain.epochs; ++epoch)
      if (!run_epoch(epoch)) {
        result_.exit_code = 130;
        return result_;
      }
    std::printf("lcm-pretrain: best %s MSE %.6g; weights %s\n",
                valid_.empty() ? "training" : "validation", result_.best_mse,
                result_.best_path.c_str());
    return result_;
  }

 private:
  void check() {
    lcm::require_device(c_.training.device);
    on_cuda_ = c_.training.device.kind == lcm::Device::CUDA;  // the same device switch as lcm-train
    lcm::set_cuda_tf32(c_.training.tf32);
    if (files_.empty())
      throw config::ConfigError("pretrain.files is empty (pretrain.files=[a.jsonl.gz,b.jsonl.gz])");
    ac_.kind = c_.pretrain.kind;
    lcm::set_num_threads(c_.training.threads);
    require_writable_base_path(c_);  // before preparing the data: one clear line
    ensure_cache_folder(c_);
    // One run per experiment at a time, as lcm-train (under MPI only rank 0 locks: `take`).
    run_lock_ = lcm::lock_experiment(c_.experiment.base_path, c_.experiment.name);
    lcm::remove_stale_run_temps(c_.experiment.base_path);
    // A new run never mixes its files with an earlier pre-training run's (docs/run-state.md).
    claim_experiment(c_.experiment.base_path, c_.experiment.name, RunTool::Pretrain, false,
                     c_.experiment.overwrite, false, o_.hooks);
    run_id_ = new_run_id();
    o_.hooks.pause("claimed");
  }

  /// Every file prepared like a training split, but keeping unlabeled schedules and every
  /// footprint group (one cache file per input file); repeats across files marked; one summary
  /// per file on stderr.
  void read_files() {
    for (size_t i = 0; i < files_.size(); ++i) {
      lcm::data::PrepareOptions o = prepare_options(c_, "train");
      o.source = files_[i];
      o.split = "pretrain" + std::to_string(i) + "_" +
                std::filesystem::path(files_[i]).filename().string();
      o.features.keep_unlabeled = true;
      o.batching.min_functions_per_footprint = 0;
      o.progress = !o_.quiet;
      std::error_code ec;
      if (std::filesystem::exists(files_[i], ec))
        lcm::data::require_regular_data_file(files_[i]);  // a directory, a pipe
      if (!std::filesystem::is_regular_file(files_[i], ec))
        throw std::runtime_error("pretrain.files: file not found: " + files_[i]);
      splits_.push_back(lcm::data::prepare_split(o));
      const std::string rebuilt = cache_rebuilt_line("lcm-pretrain", o.split, splits_.back());
      if (!rebuilt.empty()) std::fprintf(stderr, "%s\n", rebuilt.c_str());
    }
    // A program name already kept from an earlier file is skipped (program/duplicate_program),
    // counted and named, as a repeat inside one file is: the first file wins.
    lcm::data::SkipLog repeats(c_.data.strict, 10);
    std::vector<const lcm::data::Dataset*> datasets;
    for (const auto& s : splits_) datasets.push_back(&s.dataset);
    keep_ = skip_repeats_across_files(datasets, files_, repeats);
    if (const int64_t n = repeats.count("program", "duplicate_program"); n > 0)
      std::fprintf(stderr,
                   "lcm-pretrain: skipped across files: program/duplicate_program %lld (a program "
                   "name already "
                   "read in an earlier file of pretrain.files; the first file wins)\n",
                   (long long)n);
    // Per file: the programs and schedules kept, and every skip by reason (also from the cache).
    for (size_t f = 0; f < splits_.size(); ++f) {
      int64_t kept = 0, schedules = 0;
      for (size_t p = 0; p < splits_[f].dataset.programs.size(); ++p)
        if (keep_[f][p]) ++kept, schedules += splits_[f].dataset.programs[p].n_schedules();
      lcm::data::SplitCounts counts = splits_[f].counts;
      const int64_t repeated = int64_t(splits_[f].dataset.programs.size()) - kept;
      if (repeated > 0) counts.skips["program/duplicate_program"] += repeated;
      std::fprintf(stderr, "lcm-pretrain: %s: %s, %s%s\n%s\n", files_[f].c_str(),
                   lcm::data::count_of(kept, "program").c_str(),
                   lcm::data::count_of(schedules, "schedule").c_str(),
                   splits_[f].from_cache ? " (from cache)" : "",
                   skip_summary_line("lcm-pretrain", files_[f], counts, kept).c_str());
    }
  }

  /// Samples of the kept programs, split by program (seeded): pretrain.valid_fraction of the
  /// programs (at least one when the fraction is > 0 and there are two) are held out.
  void split_samples() {
    struct ProgramRef {
      int32_t file, program;
    };
    std::vector<ProgramRef> programs;
    for (size_t f = 0; f < splits_.size(); ++f)
      for (size_t p = 0; p < splits_[f].dataset.programs.size(); ++p)
        if (keep_[f][p]) programs.push_back({int32_t(f), int32_t(p)});
    lcm::Rng split_rng(c_.training.seed ^ kPretrainSplitSalt);
    lcm::data::fisher_yates(programs, split_rng);
    int64_t n_valid = int64_t(std::llround(c_.pretrain.valid_fraction * double(programs.size())));
    if (c_.pretrain.valid_fraction > 0 && n_valid == 0 && programs.size() >= 2) n_valid = 1;
    for (size_t i = 0; i < programs.size(); ++i) {
      const auto& p =
          splits_[size_t(programs[i].file)].dataset.programs[size_t(programs[i].program)];
      auto& dst = int64_t(i) < n_valid ? valid_ : train_;
      const int64_t S = ac_.kind == EncoderKind::CompVector ? p.n_schedules() : 1;
      for (int64_t s = 0; s < S; ++s)
        for (int comp = 0; comp < p.n_comps; ++comp)
          dst.push_back({programs[i].file, programs[i].program, int32_t(s), comp});
    }
    if (train_.empty()) throw std::runtime_error("no training samples in pretrain.files");
    result_.programs = int64_t(programs.size());
    result_.held_out = n_valid;
    result_.train_samples = int64_t(train_.size());
    result_.valid_samples = int64_t(valid_.size());
    std::printf(
        "lcm-pretrain: %s autoencoder on %s, %lld programs (%lld held out), %lld training / %lld "
        "validation samples\n",
        config::name_of(c_.pretrain.kind).c_str(), c_.training.device.str().c_str(),
        (long long)programs.size(), (long long)n_valid, (long long)train_.size(),
        (long long)valid_.size());
  }

  void build() {
    ae_ = std::make_unique<lcm::model::Autoencoder<float>>(ac_, c_.training.seed);
    lcm::AdamOptions ao;
    ao.lr = c_.pretrain.lr;
    opt_ = std::make_unique<lcm::Adam<float>>(lcm::parameter_pointers(ae_->params()), ao, false);
    dropout_rng_ = lcm::Rng(c_.training.seed ^ kDropoutSalt);
    shuffle_rng_ = lcm::Rng(c_.training.seed ^ kPretrainShuffleSalt);
    const std::string weights = c_.experiment.base_path + "/weights";
    result_.best_path = weights + "/best_autoencoder_" + c_.experiment.name + ".safetensors";
    result_.last_path = weights + "/last_autoencoder_" + c_.experiment.name + ".safetensors";
    std::error_code ec;
    std::filesystem::create_directories(weights, ec);
    if (ec) throw std::runtime_error("cannot create " + weights + ": " + ec.message());
    // CUDA: parameters (and, at the first step, the Adam moments) move to the device once; rows
    // are assembled on the host and copied in by the autoencoder's inputs; checkpoints from the
    // host.
    if (on_cuda_) {
      lcm::parameters_to_device(ae_->params(), c_.training.device.index);
      tape_.set_device(lcm::Device::CUDA, c_.training.device.index);
    }
    order_ = iota(train_.size());
    vorder_ = iota(valid_.size());
  }

  void save(const std::string& path, int epoch, double val) {
    if (on_cuda_) lcm::parameters_to_host(ae_->params());
    std::string file_list;
    for (const auto& f : files_) file_list += (file_list.empty() ? "" : ",") + f;
    lcm::save_parameters(path, ae_->params(),
                         {{meta::kFormat, "autoencoder"},
                          {meta::kAutoencoder, ac_.to_json()},
                          {meta::kAutoencoderKind, config::name_of(c_.pretrain.kind)},
                          {meta::kEpoch, std::to_string(epoch)},
                          {meta::kValMse, format_number(val)},
                          {meta::kPretrainFiles, file_list},
                          {meta::kExperiment, c_.experiment.name},
                          {meta::kRunId, run_id_}});
  }

  void write_logs() const {
    write_pretrain_logs(c_.experiment.base_path, c_.experiment.name,
                        config::name_of(c_.pretrain.kind), result_.history, run_id_);
  }

  /// One epoch: shuffled training batches (at most pretrain.max_samples), validation, logs and
  /// checkpoints. False when stopped (last saved).
  bool run_epoch(int epoch) {
    const auto t0 = Clock::now();
    const int64_t bs = c_.pretrain.batch_size;
    lcm::data::fisher_yates(order_, shuffle_rng_);
    const int64_t n_train = c_.pretrain.max_samples > 0
                                ? std::min<int64_t>(c_.pretrain.max_samples, int64_t(order_.size()))
                                : int64_t(order_.size());
    double sum = 0;
    for (int64_t b = 0; b < n_train; b += bs) {
      const int64_t e = std::min(n_train, b + bs);
      fill_rows(ac_.kind, splits_, train_, order_, b, e, rows_, comp_buf_);
      tape_.clear();
      tape_.set_training(true);
      tape_.set_grad_enabled(true);
      const lcm::NodeId loss = ae_->loss(tape_, rows_.data(), e - b, dropout_rng_);
      const double lv = double(lcm::to_host(tape_.value(loss))[0]);  // host or device
      if (!std::isfinite(lv))
        throw std::runtime_error("loss is not finite at epoch " + std::to_string(epoch + 1) +
                                 ", sample " + std::to_string(b));
      tape_.backward(loss);
      opt_->step();
      opt_->zero_grad();
      sum += lv * double(e - b);
      bar_.update("epoch " + std::to_string(epoch + 1), e, n_train, "MSE", sum / double(e), 5);
      if (stop_->load()) break;
    }
    bar_.clear();
    if (stop_->load()) {
      save(result_.last_path, epoch, NAN);
      write_logs();
      std::fprintf(stderr, "lcm-pretrain: interrupted in epoch %d; saved %s\n", epoch + 1,
                   result_.last_path.c_str());
      return false;
    }
    const double train_seconds = seconds_since(t0);
    double vsum = 0;
    tape_.set_training(false);
    tape_.set_grad_enabled(false);
    for (int64_t b = 0; b < int64_t(vorder_.size()); b += bs) {
      const int64_t e = std::min(int64_t(vorder_.size()), b + bs);
      fill_rows(ac_.kind, splits_, valid_, vorder_, b, e, rows_, comp_buf_);
      tape_.clear();
      vsum += double(lcm::to_host(
                  tape_.value(ae_->loss(tape_, rows_.data(), e - b, dropout_rng_)))[0]) *
              double(e - b);
    }
    PretrainEpochRecord r{epoch + 1, sum / double(n_train),
                          valid_.empty() ? NAN : vsum / double(valid_.size()), seconds_since(t0),
                          double(n_train) / std::max(1e-9, train_seconds)};
    result_.history.push_back(r);
    // best by validation MSE (by training MSE when nothing is held out); <= keeps the later one
    const double score = valid_.empty() ? r.train_mse : r.val_mse;
    const bool is_best = score <= result_.best_mse;
    if (is_best) {
      result_.best_mse = score;
      save(result_.best_path, epoch + 1, r.val_mse);
    }
    save(result_.last_path, epoch + 1, r.val_mse);
    write_logs();
    std::printf("%6d %14.6g %14.6g %9.2f %12.1f%s\n", r.epoch, r.train_mse, r.val_mse, r.seconds,
                r.samples_per_s, is_best ? "  *best" : "");
    std::fflush(stdout);
    return true;
  }

  const config::Config& c_;
  const PretrainOptions& o_;
  const std::atomic<bool>* stop_;
  const std::vector<std::string>& files_;
  PretrainResult result_;
  lcm::RunLock run_lock_;  // held from check() to the end of the run
  std::string run_id_;     // lcm.run_id of every file of this run
  bool on_cuda_ = false;
  lcm::model::AutoencoderConfig ac_;
  std::vector<lcm::data::PreparedSplit> splits_;
  std::vector<std::vector<char>> keep_;
  std::vector<Sample> train_, valid_;
  std::unique_ptr<lcm::model::Autoencoder<float>> ae_;
  std::unique_ptr<lcm::Adam<float>> opt_;
  lcm::Rng dropout_rng_{0}, shuffle_rng_{0};
  std::vector<int64_t> order_, vorder_;
  lcm::Tape<float> tape_;
  std::vector<float> rows_, comp_buf_;
  ProgressBar bar_{!o_.quiet};
};

}  // namespace

PretrainResult pretrain(const config::Config& c, const PretrainOptions& o) {
  Pretrainer p(c, o);
  return p.run();
}

}  // namespace lcm::train
