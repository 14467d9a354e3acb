// Autoencoder pre-training behind lcm-pretrain (see pretrainer.hpp): the files prepared like
// training splits (unlabeled schedules kept), repeats across files skipped, samples split by
// program, Adam on the reconstruction MSE, best/last checkpoints and logs after every epoch.
#include "train/pretrainer.hpp"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <unordered_map>
#include <utility>

#include "data/dataset.hpp"
#include "data/prepare.hpp"
#include "data/reader.hpp"
#include "data/row_budget.hpp"
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

/// The samples of a list of programs without a record per sample: program k of `programs` owns
/// the consecutive samples [start[k], start[k + 1]), schedule-major then computation (comp_vector:
/// S · C of them; access_matrix: C). 16 bytes a program.
class SampleTable {
 public:
  struct ProgramRef {
    int32_t file, program;
  };

  /// Appends program (file, program) with `schedules` × `comps` samples.
  void add(ProgramRef p, int64_t schedules, int comps) {
    if (start_.empty()) start_.push_back(0);
    programs_.push_back(p);
    comps_.push_back(comps);
    start_.push_back(start_.back() + schedules * int64_t(comps));
  }
  int64_t size() const { return start_.empty() ? 0 : start_.back(); }
  const std::vector<ProgramRef>& programs() const { return programs_; }
  bool empty() const { return size() == 0; }
  /// Sample i (0 ≤ i < size()), found by binary search over the programs' first samples.
  Sample at(int64_t i) const {
    const size_t k = size_t(std::upper_bound(start_.begin(), start_.end(), i) - start_.begin()) - 1;
    const int64_t local = i - start_[k];
    const int64_t C = comps_[k];
    return {programs_[k].file, programs_[k].program, int32_t(local / C), int32_t(local % C)};
  }
  /// Heap bytes of the table (what it adds to the host memory of the data).
  int64_t bytes() const {
    return int64_t(programs_.capacity() * sizeof(ProgramRef) + start_.capacity() * sizeof(int64_t) +
                   comps_.capacity() * sizeof(int32_t));
  }

 private:
  std::vector<ProgramRef> programs_;
  std::vector<int64_t> start_;  // [programs + 1]
  std::vector<int32_t> comps_;  // [programs]: C
};

/// The order of the training samples, reshuffled in place every epoch: 4 bytes a sample (8 past
/// 2^32 − 1 samples). The Fisher–Yates swaps depend only on the rng and the length, so the
/// permutation is the same bits whatever the element width.
class SampleOrder {
 public:
  void assign(int64_t n) {
    if (uint64_t(n) <= uint64_t(UINT32_MAX)) {
      small_.resize(size_t(n));
      for (int64_t i = 0; i < n; ++i) small_[size_t(i)] = uint32_t(i);
    } else {
      large_.resize(size_t(n));
      for (int64_t i = 0; i < n; ++i) large_[size_t(i)] = uint64_t(i);
    }
  }
  int64_t size() const { return int64_t(small_.empty() ? large_.size() : small_.size()); }
  int64_t operator[](int64_t i) const {
    return small_.empty() ? int64_t(large_[size_t(i)]) : int64_t(small_[size_t(i)]);
  }
  template <class R>
  void shuffle(R& rng) {
    if (small_.empty())
      lcm::data::fisher_yates(large_, rng);
    else
      lcm::data::fisher_yates(small_, rng);
  }
  int64_t bytes() const {
    return int64_t(small_.capacity() * sizeof(uint32_t) + large_.capacity() * sizeof(uint64_t));
  }

 private:
  std::vector<uint32_t> small_;
  std::vector<uint64_t> large_;
};

/// Bytes a compact program holds in lcm-pretrain (data/row_budget.hpp resident_bytes, less the
/// batches' references to its schedules, which lcm-pretrain frees, plus the struct itself).
int64_t compact_bytes(const lcm::data::ProgramFeatures& p) {
  return lcm::data::resident_bytes(p) - p.n_schedules() * int64_t(sizeof(lcm::data::DatapointRef)) +
         int64_t(sizeof(lcm::data::ProgramFeatures));
}

/// Bytes of one entry of StaticStore's table besides its string (hash node, key, vector, bucket).
constexpr int64_t kDeflatedEntryBytes = 64;

/// The static columns [C, 910] and expressions [C, 66, 11] of the programs whose floats
/// training.host_memory_budget cannot hold: deflated (zlib level 1), one byte string per program,
/// inflated again whenever a batch needs them (the same bits). The programs whose floats are held
/// are read in place.
class StaticStore {
 public:
  /// Deflates program (file, program)'s static columns and expressions and frees their floats.
  /// Returns the bytes of the deflated string. Throws std::runtime_error when zlib fails.
  int64_t deflate(int32_t file, int32_t program, lcm::data::ProgramFeatures& p) {
    std::vector<float> raw(p.comp_static.size() + p.expr.size());
    std::copy(p.comp_static.begin(), p.comp_static.end(), raw.begin());
    std::copy(p.expr.begin(), p.expr.end(), raw.begin() + std::ptrdiff_t(p.comp_static.size()));
    uLongf n = compressBound(uLong(raw.size() * sizeof(float)));
    std::vector<uint8_t> z(n);
    if (compress2(z.data(), &n, reinterpret_cast<const Bytef*>(raw.data()),
                  uLong(raw.size() * sizeof(float)), 1) != Z_OK)
      throw std::runtime_error("cannot deflate the static columns of program " + p.name);
    z.resize(n);
    z.shrink_to_fit();
    std::vector<float>().swap(p.comp_static);
    std::vector<float>().swap(p.expr);
    const int64_t bytes = int64_t(z.capacity()) + kDeflatedEntryBytes;
    erase(file, program);
    deflated_[key(file, program)] = {std::move(z), int64_t(raw.size() * sizeof(float))};
    bytes_ += bytes;
    float_bytes_ += int64_t(raw.size() * sizeof(float));
    return bytes;
  }
  /// Gives program (file, program) its static columns and expressions back as floats and forgets
  /// its deflated string. Throws std::runtime_error as statics().
  void inflate(int32_t file, int32_t program, lcm::data::ProgramFeatures& p) {
    constexpr size_t CW = lcm::data::kCompVectorWidth,
                     XW = lcm::data::kMaxExprLen * lcm::data::kExprNodeWidth;
    const auto [comp_static, expr] = statics(file, program, p);
    const size_t C = size_t(p.n_comps);
    p.comp_static.assign(comp_static, comp_static + C * CW);
    p.expr.assign(expr, expr + C * XW);
    erase(file, program);
  }
  /// Bytes held for program (file, program)'s deflated string with its entry (0 when none), and
  /// what its floats take.
  int64_t bytes_of(int32_t file, int32_t program) const {
    const auto it = deflated_.find(key(file, program));
    return it == deflated_.end() ? 0 : int64_t(it->second.z.capacity()) + kDeflatedEntryBytes;
  }
  int64_t float_bytes_of(int32_t file, int32_t program) const {
    const auto it = deflated_.find(key(file, program));
    return it == deflated_.end() ? 0 : it->second.float_bytes;
  }
  /// Forgets program (file, program)'s deflated string, if any.
  void erase(int32_t file, int32_t program) {
    const auto it = deflated_.find(key(file, program));
    if (it == deflated_.end()) return;
    bytes_ -= int64_t(it->second.z.capacity()) + kDeflatedEntryBytes;
    float_bytes_ -= it->second.float_bytes;
    deflated_.erase(it);
    buffered_ = UINT64_MAX;
  }
  /// Forgets every deflated string of file `file`.
  void erase_file(int32_t file) {
    std::vector<uint64_t> keys;
    for (const auto& e : deflated_)
      if (int32_t(e.first >> 32) == file) keys.push_back(e.first);
    for (uint64_t k : keys) erase(int32_t(k >> 32), int32_t(uint32_t(k)));
  }
  int64_t programs() const { return int64_t(deflated_.size()); }
  int64_t bytes() const { return bytes_; }              // held, with the table's entries
  int64_t float_bytes() const { return float_bytes_; }  // the same as floats

  /// The static columns [C, 910] and expressions [C, 66, 11] of `p`, program (file, program):
  /// its own floats, or its deflated string inflated into this store's buffer (valid until the
  /// next call for another program; the last one is kept). Throws std::runtime_error when the
  /// deflated string does not inflate to C · (910 + 726) floats.
  std::pair<const float*, const float*> statics(int32_t file, int32_t program,
                                                const lcm::data::ProgramFeatures& p) {
    constexpr size_t CW = lcm::data::kCompVectorWidth,
                     XW = lcm::data::kMaxExprLen * lcm::data::kExprNodeWidth;
    if (!p.comp_static.empty()) return {p.comp_static.data(), p.expr.data()};
    const uint64_t k = key(file, program);
    const size_t C = size_t(p.n_comps);
    if (k != buffered_) {
      const auto it = deflated_.find(k);
      if (it == deflated_.end())
        throw std::runtime_error("program " + p.name + " holds no static columns");
      buffer_.resize(C * (CW + XW));
      uLongf n = uLongf(buffer_.size() * sizeof(float));
      if (uncompress(reinterpret_cast<Bytef*>(buffer_.data()), &n, it->second.z.data(),
                     uLong(it->second.z.size())) != Z_OK ||
          n != buffer_.size() * sizeof(float))
        throw std::runtime_error("cannot inflate the static columns of program " + p.name);
      buffered_ = k;
    }
    return {buffer_.data(), buffer_.data() + C * CW};
  }

 private:
  static uint64_t key(int32_t file, int32_t program) {
    return (uint64_t(uint32_t(file)) << 32) | uint32_t(program);
  }
  struct Entry {
    std::vector<uint8_t> z;
    int64_t float_bytes = 0;
  };
  std::unordered_map<uint64_t, Entry> deflated_;
  int64_t bytes_ = 0, float_bytes_ = 0;
  std::vector<float> buffer_;
  uint64_t buffered_ = UINT64_MAX;
};

/// Fills rows [end − begin, input width] for samples order(begin) .. order(end − 1) of `table`:
/// the computation vector + expression (docs/model-spec.md §8.1) or the schedule-independent
/// access rows (§8.2). A compact program's schedule rows are rebuilt from its descriptors
/// (ProgramFeatures::comp_vectors: the same bits as held rows).
template <class OrderFn>
void fill_rows(EncoderKind kind, const std::vector<lcm::data::PreparedSplit>& splits,
               StaticStore& statics, const SampleTable& table, OrderFn order, int64_t begin,
               int64_t end, std::vector<float>& rows, std::vector<float>& comp_buf,
               std::vector<float>& sched_buf) {
  const int W = kind == EncoderKind::CompVector ? lcm::model::kCompAeInputWidth
                                                : lcm::model::kAccessInputWidth;
  rows.resize(size_t((end - begin) * W));
  constexpr int CW = lcm::data::kCompVectorWidth,
                XW = lcm::data::kMaxExprLen * lcm::data::kExprNodeWidth;
  const std::vector<int>& sched_cols = lcm::data::schedule_columns();
  for (int64_t i = begin; i < end; ++i) {
    const Sample s = table.at(order(i));
    const lcm::data::ProgramFeatures& p =
        splits[size_t(s.file)].dataset.programs[size_t(s.program)];
    const auto [comp_static, expr] = statics.statics(s.file, s.program, p);
    float* out = &rows[size_t((i - begin) * W)];
    if (kind == EncoderKind::AccessMatrix) {  // access columns are schedule-independent (§3.2)
      lcm::model::access_ae_input(comp_static + size_t(s.comp) * CW, out);
    } else {
      // ProgramFeatures::comp_vectors over `comp_static`: the static columns, then the schedule
      // columns (held, or rebuilt from the descriptor) in their places
      const size_t C = size_t(p.n_comps), SC = size_t(lcm::data::kScheduleColumns);
      sched_buf.resize(C * SC);
      p.schedule_rows(s.schedule, sched_buf.data(), nullptr);
      comp_buf.resize(CW);
      std::copy(comp_static + size_t(s.comp) * CW, comp_static + size_t(s.comp + 1) * CW,
                comp_buf.begin());
      for (size_t k = 0; k < SC; ++k)
        comp_buf[size_t(sched_cols[k])] = sched_buf[size_t(s.comp) * SC + k];
      lcm::model::comp_vector_ae_input(comp_buf.data(), expr + size_t(s.comp) * XW, out);
    }
  }
}

class Pretrainer {
 public:
  Pretrainer(const config::Config& c, const PretrainOptions& o)
      : c_(c), o_(o), stop_(o.stop ? o.stop : &stop_requested()), files_(c.pretrain.files) {}

  PretrainResult run() {
    check();
    const auto t0 = Clock::now();
    read_files();
    split_samples();
    place_rows();
    std::fprintf(stderr, "lcm-pretrain: data ready in %.1f s\n", seconds_since(t0));
    build();
    const std::string label = loss_label();
    std::printf("%6s %14s %14s %9s %12s\n", "epoch", ("train_" + label).c_str(),
                ("val_" + label).c_str(), "seconds", "samples/s");
    std::fflush(stdout);
    for (int epoch = 0; epoch < c_.pretrain.epochs; ++epoch)
      if (!run_epoch(epoch)) {
        result_.exit_code = 130;
        return result_;
      }
    std::printf("lcm-pretrain: best %s %s %.6g; weights %s\n",
                valid_.empty() ? "training" : "validation", label.c_str(), result_.best_mse,
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

  /// The loss's name in the output and logs: "MSE" (reconstruct), "masked_MSE", "InfoNCE".
  std::string loss_label() const {
    switch (c_.pretrain.objective) {
      case config::PretrainObjective::Masked:
        return "masked_MSE";
      case config::PretrainObjective::Contrastive:
        return "InfoNCE";
      default:
        return "MSE";
    }
  }

  /// The loss of pretrain.objective on n rows (the masks drawn from `mask_rng`).
  lcm::NodeId objective_loss(int64_t n, lcm::Rng& mask_rng) {
    const int64_t W = ac_.input_width();
    switch (c_.pretrain.objective) {
      case config::PretrainObjective::Masked:
        return ae_->masked_loss(tape_, rows_.data(), n,
                                lcm::model::draw_mask(n * W, W, c_.pretrain.mask_rate, mask_rng),
                                dropout_rng_);
      case config::PretrainObjective::Contrastive: {
        const std::vector<uint8_t> a =
            lcm::model::draw_mask(n * W, W, c_.pretrain.mask_rate, mask_rng);
        const std::vector<uint8_t> b =
            lcm::model::draw_mask(n * W, W, c_.pretrain.mask_rate, mask_rng);
        return ae_->contrastive_loss(tape_, rows_.data(), n, a, b, c_.pretrain.temperature,
                                     dropout_rng_);
      }
      default:
        return ae_->loss(tape_, rows_.data(), n, dropout_rng_);
    }
  }

  /// training.host_memory_budget in bytes.
  int64_t budget_bytes() const {
    const config::MemoryBudget& hb = c_.training.host_memory_budget;
    const double physical = double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGESIZE));
    return hb.is_fraction ? int64_t(hb.fraction * std::max(physical, 0.0)) : int64_t(hb.bytes);
  }

  /// Keeps a copy of program `p` of file `file` as its cache is read, its static columns and
  /// expressions deflated (place_rows() inflates again those that fit training.host_memory_budget
  /// once every program is read: the floats of all programs are never held at once, and the
  /// peak is about the budget or the deflated data, whichever is larger). A cache read again from
  /// its first program (PrepareOptions::on_kept_features) starts the file over.
  void take_program(int32_t file, const lcm::data::ProgramFeatures& p) {
    if (!taken_.empty() && taken_.front().name == p.name) forget_taken(file);
    lcm::data::ProgramFeatures q = p;
    statics_.deflate(file, int32_t(taken_.size()), q);
    taken_.push_back(std::move(q));
  }
  /// Drops what take_program kept of file `file`.
  void forget_taken(int32_t file) {
    taken_.clear();
    statics_.erase_file(file);
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
      // As lcm-train: the programs come back compact (descriptors, no [S,C,146] / [S,L,8] rows;
      // place_rows() expands those that fit training.host_memory_budget) and without their
      // sched_str (never printed here).
      o.compact_rows = true;
      o.keep_sched_str = false;
      std::error_code ec;
      if (std::filesystem::exists(files_[i], ec))
        lcm::data::require_regular_data_file(files_[i]);  // a directory, a pipe
      if (!std::filesystem::is_regular_file(files_[i], ec))
        throw std::runtime_error("pretrain.files: file not found: " + files_[i]);
      if (o.cache_dir.empty()) {  // no cache to stream from: the programs are read in memory
        splits_.push_back(lcm::data::prepare_split(o));
      } else {
        // Streamed as lcm-prepare does (the cache written program by program when it is built),
        // then read back one program at a time through take_program, which keeps each compact
        // within training.host_memory_budget: the whole file's floats are never held at once.
        o.stream_to_cache = true;
        o.on_kept_features = [this, i](const lcm::data::ProgramFeatures& p) {
          take_program(int32_t(i), p);
        };
        taken_.clear();
        lcm::data::PreparedSplit s = lcm::data::prepare_split(o);
        if (!s.from_cache) {  // just built: read it back
          forget_taken(int32_t(i));
          lcm::data::PreparedSplit again = lcm::data::prepare_split(o);
          if (!again.from_cache)
            throw std::runtime_error("cannot read back the cache " + s.cache_path + " of " +
                                     files_[i]);
          again.from_cache = false;
          again.cache_note = s.cache_note;
          again.seconds += s.seconds;
          s = std::move(again);
        }
        s.dataset.programs = std::move(taken_);
        taken_.clear();
        splits_.push_back(std::move(s));
      }
      // the batches of the split are lcm-train's, not used here (8 bytes a schedule)
      std::vector<lcm::data::Batch>().swap(splits_.back().dataset.batches);
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
    using ProgramRef = SampleTable::ProgramRef;
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
      if (p.n_comps > 0 && S > 0) dst.add(programs[i], S, p.n_comps);
    }
    // (the same samples in the same order as one record per (program, schedule, computation))
    if (train_.empty()) throw std::runtime_error("no training samples in pretrain.files");
    result_.programs = int64_t(programs.size());
    result_.held_out = n_valid;
    result_.train_samples = train_.size();
    result_.valid_samples = valid_.size();
    order_.assign(train_.size());
    std::printf(
        "lcm-pretrain: %s autoencoder on %s, %lld programs (%lld held out), %lld training / %lld "
        "validation samples\n",
        config::name_of(c_.pretrain.kind).c_str(), c_.training.device.str().c_str(),
        (long long)programs.size(), (long long)n_valid, (long long)train_.size(),
        (long long)valid_.size());
  }

  /// Host memory (training.host_memory_budget, as lcm-train): the compact data of every kept
  /// program (static columns, expressions, descriptors; repeats across files freed) and the
  /// sample tables count first; then the expanded schedule rows of the training programs, then of
  /// the validation programs, in file order, while they fit (first fit); the other programs stay
  /// compact and their rows are rebuilt from the descriptors for every batch (the same bits).
  /// Prints one line on stderr.
  void place_rows() {
    lcm::data::RowPlacement& r = placement_;
    r.budget = budget_bytes();
    // a program repeated from an earlier file is never a sample: only its name stays
    for (size_t f = 0; f < splits_.size(); ++f)
      for (size_t p = 0; p < splits_[f].dataset.programs.size(); ++p)
        if (!keep_[f][p]) {
          splits_[f].dataset.programs[p] = lcm::data::ProgramFeatures();
          statics_.erase(int32_t(f), int32_t(p));
        }
    tables_bytes_ = train_.bytes() + valid_.bytes() + order_.bytes();
    r.bytes_resident = tables_bytes_ + statics_.bytes();
    for (size_t f = 0; f < splits_.size(); ++f)
      for (size_t p = 0; p < splits_[f].dataset.programs.size(); ++p)
        r.bytes_resident += compact_bytes(splits_[f].dataset.programs[p]);
    // Over the budget: the static columns and expressions (6.5 KB a computation as floats, most
    // of the compact data) are deflated, from the last validation program backwards, until the
    // rest fits or every program's are.
    const std::vector<const SampleTable*> tables = {&train_, &valid_};
    for (auto t = tables.rbegin(); t != tables.rend() && r.bytes_resident > r.budget; ++t)
      for (auto ref = (*t)->programs().rbegin();
           ref != (*t)->programs().rend() && r.bytes_resident > r.budget; ++ref) {
        lcm::data::ProgramFeatures& p =
            splits_[size_t(ref->file)].dataset.programs[size_t(ref->program)];
        if (p.comp_static.empty()) continue;  // deflated as it was read
        const int64_t floats =
            int64_t((p.comp_static.capacity() + p.expr.capacity()) * sizeof(float));
        r.bytes_resident += statics_.deflate(ref->file, ref->program, p) - floats;
      }
    // Under the budget: the deflated programs (every one, when the files came through the
    // cache) get their floats back while they fit, training programs first (first fit).
    for (const SampleTable* t : tables)
      for (const SampleTable::ProgramRef& ref : t->programs()) {
        if (r.bytes_resident >= r.budget) break;
        lcm::data::ProgramFeatures& p =
            splits_[size_t(ref.file)].dataset.programs[size_t(ref.program)];
        if (!p.comp_static.empty()) continue;
        const int64_t floats = statics_.float_bytes_of(ref.file, ref.program);
        const int64_t z = statics_.bytes_of(ref.file, ref.program);
        if (r.bytes_resident + floats - z > r.budget) continue;
        statics_.inflate(ref.file, ref.program, p);
        r.bytes_resident += floats - z;
      }
    const int64_t rows_budget = r.budget - r.bytes_resident;  // may be negative: all compact
    // access_matrix samples read the static columns only: no schedule rows to hold
    if (ac_.kind == EncoderKind::CompVector)
      for (const SampleTable* t : {&train_, &valid_})
        for (const SampleTable::ProgramRef& ref : t->programs()) {
          lcm::data::ProgramFeatures& p =
              splits_[size_t(ref.file)].dataset.programs[size_t(ref.program)];
          const int64_t bytes = lcm::data::expanded_row_bytes(p);
          if (r.bytes_held + bytes <= rows_budget) {
            p.load_rows();
            r.bytes_held += bytes;
            ++r.programs_held;
            r.schedules_held += p.n_schedules();
          } else {
            r.bytes_compact += bytes;
            ++r.programs_compact;
            r.schedules_compact += p.n_schedules();
          }
        }
    std::fprintf(stderr, "lcm-pretrain: %s\n", memory_line().c_str());
  }

  /// The host-memory line of place_rows() (docs/tools.md, lcm-pretrain).
  std::string memory_line() const {
    const lcm::data::RowPlacement& r = placement_;
    const double mib = double(1 << 20);
    char buf[800];
    if (ac_.kind == EncoderKind::AccessMatrix)
      std::snprintf(buf, sizeof buf,
                    "host memory: %.1f MiB of compact program data and %.1f MiB of sample tables "
                    "(%s) held within training.host_memory_budget (%.1f MiB); access_matrix "
                    "samples read no schedule rows",
                    double(r.bytes_resident - tables_bytes_) / mib, double(tables_bytes_) / mib,
                    lcm::data::count_of(train_.size(), "training sample").c_str(),
                    double(r.budget) / mib);
    else
      std::snprintf(
          buf, sizeof buf,
          "host memory: %.1f MiB of compact program data, %.1f MiB of sample tables "
          "(%s) and the schedule rows of %lld of %lld programs (%lld of "
          "%lld schedules, %.1f MiB) held within training.host_memory_budget (%.1f MiB); "
          "the other rows (%.1f MiB expanded) are rebuilt from their descriptors at batch "
          "time",
          double(r.bytes_resident - tables_bytes_) / mib, double(tables_bytes_) / mib,
          lcm::data::count_of(train_.size(), "training sample").c_str(), (long long)r.programs_held,
          (long long)(r.programs_held + r.programs_compact), (long long)r.schedules_held,
          (long long)(r.schedules_held + r.schedules_compact), double(r.bytes_held) / mib,
          double(r.budget) / mib, double(r.bytes_compact) / mib);
    std::string line = buf;
    if (statics_.programs() > 0) {
      std::snprintf(buf, sizeof buf,
                    "; the static columns and expressions of %lld programs are held deflated "
                    "(%.1f MiB, %.1f MiB as floats) and inflated at batch time",
                    (long long)statics_.programs(), double(statics_.bytes()) / mib,
                    double(statics_.float_bytes()) / mib);
      line += buf;
    }
    if (r.bytes_resident > r.budget) {
      std::snprintf(buf, sizeof buf,
                    " (the compact data and sample tables alone exceed the budget by %.1f MiB "
                    "even deflated: they are held whole)",
                    double(r.bytes_resident - r.budget) / mib);
      line += buf;
    }
    return line;
  }

  void build() {
    ae_ = std::make_unique<lcm::model::Autoencoder<float>>(ac_, c_.training.seed);
    lcm::AdamOptions ao;
    ao.lr = c_.pretrain.lr;
    opt_ = std::make_unique<lcm::Adam<float>>(lcm::parameter_pointers(ae_->params()), ao, false);
    dropout_rng_ = lcm::Rng(c_.training.seed ^ kDropoutSalt);
    mask_rng_ = lcm::Rng(c_.training.seed ^ kPretrainMaskSalt);
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
  }

  void save(const std::string& path, int epoch, double val) {
    if (on_cuda_) lcm::parameters_to_host(ae_->params());
    std::string file_list;
    for (const auto& f : files_) file_list += (file_list.empty() ? "" : ",") + f;
    // lcm.val_mse is the §8 reconstruction MSE only; another objective's validation loss is
    // lcm.val_loss, named by lcm.pretrain_objective
    const bool mse = c_.pretrain.objective == config::PretrainObjective::Reconstruct;
    lcm::save_parameters(path, ae_->params(),
                         {{meta::kFormat, "autoencoder"},
                          {meta::kAutoencoder, ac_.to_json()},
                          {meta::kAutoencoderKind, config::name_of(c_.pretrain.kind)},
                          {meta::kEpoch, std::to_string(epoch)},
                          {mse ? meta::kValMse : meta::kValLoss, format_number(val)},
                          {meta::kPretrainObjective, config::name_of(c_.pretrain.objective)},
                          {meta::kPretrainFiles, file_list},
                          {meta::kExperiment, c_.experiment.name},
                          {meta::kRunId, run_id_}});
  }

  void write_logs() const {
    write_pretrain_logs(c_.experiment.base_path, c_.experiment.name,
                        config::name_of(c_.pretrain.kind), result_.history, run_id_,
                        c_.pretrain.objective == config::PretrainObjective::Reconstruct
                            ? ""
                            : config::name_of(c_.pretrain.objective));
  }

  /// One epoch: shuffled training batches (at most pretrain.max_samples), validation, logs and
  /// checkpoints. False when stopped (last saved).
  bool run_epoch(int epoch) {
    const auto t0 = Clock::now();
    const int64_t bs = c_.pretrain.batch_size;
    order_.shuffle(shuffle_rng_);
    const int64_t n_train = c_.pretrain.max_samples > 0
                                ? std::min<int64_t>(c_.pretrain.max_samples, order_.size())
                                : order_.size();
    const auto train_at = [this](int64_t i) { return order_[i]; };
    double sum = 0;
    for (int64_t b = 0; b < n_train; b += bs) {
      const int64_t e = std::min(n_train, b + bs);
      fill_rows(ac_.kind, splits_, statics_, train_, train_at, b, e, rows_, comp_buf_, sched_buf_);
      tape_.clear();
      tape_.set_training(true);
      tape_.set_grad_enabled(true);
      const lcm::NodeId loss = objective_loss(e - b, mask_rng_);
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
    const auto valid_at = [](int64_t i) { return i; };  // in program order, never shuffled
    // the same validation masks every epoch: the epochs' losses are comparable
    lcm::Rng valid_masks(c_.training.seed ^ kPretrainMaskSalt ^ kPretrainValidSalt);
    for (int64_t b = 0; b < valid_.size(); b += bs) {
      const int64_t e = std::min(valid_.size(), b + bs);
      fill_rows(ac_.kind, splits_, statics_, valid_, valid_at, b, e, rows_, comp_buf_, sched_buf_);
      tape_.clear();
      vsum +=
          double(lcm::to_host(tape_.value(objective_loss(e - b, valid_masks)))[0]) * double(e - b);
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
  SampleTable train_, valid_;
  std::unique_ptr<lcm::model::Autoencoder<float>> ae_;
  std::unique_ptr<lcm::Adam<float>> opt_;
  lcm::Rng dropout_rng_{0}, shuffle_rng_{0}, mask_rng_{0};
  SampleOrder order_;                  // the training samples' order, reshuffled each epoch
  lcm::data::RowPlacement placement_;  // what place_rows() held and left compact
  int64_t tables_bytes_ = 0;           // the sample tables and order, bytes
  lcm::Tape<float> tape_;
  std::vector<float> rows_, comp_buf_, sched_buf_;
  StaticStore statics_;                            // the deflated static columns (place_rows)
  std::vector<lcm::data::ProgramFeatures> taken_;  // the programs of the file being read
  ProgressBar bar_{!o_.quiet};
};

}  // namespace

PretrainResult pretrain(const config::Config& c, const PretrainOptions& o) {
  Pretrainer p(c, o);
  return p.run();
}

}  // namespace lcm::train
