// lcm-pretrain: self-supervised pre-training of a program encoder (model-spec §8; Liu & Baghdadi,
// CC 2025): trains the computation-vector or access-matrix autoencoder with MSE and Adam on the
// unlabeled computations of LOOPerSet files and keeps the best-validation checkpoint.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "data/dataset.hpp"
#include "data/prepare.hpp"
#include "data/reader.hpp"
#include "engine/atomic_file.hpp"
#include "engine/device.hpp"
#include "engine/device_memory.hpp"
#include "engine/optim.hpp"
#include "engine/rng.hpp"
#include "engine/safetensors.hpp"
#include "engine/tape.hpp"
#include "engine/threads.hpp"
#include "model/autoencoder.hpp"
#include "train/checkpoint.hpp"
#include "config/cli.hpp"
#include "config/config.hpp"
#include "tools/common/run_tool.hpp"
#include "train/overlap.hpp"
#include "train/splits.hpp"
#include "train/report.hpp"
#include "train/startup_checks.hpp"

namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted.store(true); }

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

using lcm::model::EncoderKind;

/// One training sample: computation `comp` of kept schedule `schedule` (comp_vector) or of the
/// program (access_matrix: schedule-independent, schedule = 0) of program `program` of file `file`.
struct Sample {
  int32_t file = 0, program = 0, schedule = 0, comp = 0;
};

/// Fills rows [n, width] for samples [begin, end) of `order`.
void fill_rows(EncoderKind kind, const std::vector<lcm::data::PreparedSplit>& splits, const std::vector<Sample>& samples,
               const std::vector<int64_t>& order, int64_t begin, int64_t end, std::vector<float>& rows,
               std::vector<float>& comp_buf) {
  const int W = kind == EncoderKind::CompVector ? lcm::model::kCompAeInputWidth : lcm::model::kAccessInputWidth;
  rows.resize(size_t((end - begin) * W));
  constexpr int CW = lcm::data::kCompVectorWidth, XW = lcm::data::kMaxExprLen * lcm::data::kExprNodeWidth;
  for (int64_t i = begin; i < end; ++i) {
    const Sample& s = samples[size_t(order[size_t(i)])];
    const lcm::data::ProgramFeatures& p = splits[size_t(s.file)].dataset.programs[size_t(s.program)];
    float* out = &rows[size_t((i - begin) * W)];
    if (kind == EncoderKind::AccessMatrix) {  // access columns are schedule-independent (§3.2)
      lcm::model::access_ae_input(&p.comp_static[size_t(s.comp) * CW], out);
    } else {
      comp_buf.resize(size_t(p.n_comps) * CW);
      p.comp_vectors(s.schedule, comp_buf.data());
      lcm::model::comp_vector_ae_input(&comp_buf[size_t(s.comp) * CW], &p.expr[size_t(s.comp) * XW], out);
    }
  }
}

struct EpochRecord {
  int epoch = 0;
  double train_mse = 0, val_mse = NAN, seconds = 0, samples_per_s = 0;
};

void write_logs(const std::string& base, const std::string& name, const std::string& kind,
                const std::vector<EpochRecord>& h) {
  using lcm::train::format_number;
  std::string jsonl, csv = "epoch,train_mse,val_mse,seconds,samples_per_s\n";
  lcm::train::PlotSeries tr{"train MSE", "#1f77b4", {}, {}}, va{"validation MSE", "#ff7f0e", {}, {}};
  for (const auto& r : h) {
    auto num = [](double v) { return std::isfinite(v) ? format_number(v) : std::string("null"); };
    jsonl += "{\"epoch\":" + std::to_string(r.epoch) + ",\"train_mse\":" + num(r.train_mse) + ",\"val_mse\":" +
             num(r.val_mse) + ",\"seconds\":" + num(r.seconds) + ",\"samples_per_s\":" + num(r.samples_per_s) + "}\n";
    csv += std::to_string(r.epoch) + "," + format_number(r.train_mse) + "," + format_number(r.val_mse) + "," +
           format_number(r.seconds) + "," + format_number(r.samples_per_s) + "\n";
    tr.x.push_back(r.epoch), tr.y.push_back(r.train_mse);
    va.x.push_back(r.epoch), va.y.push_back(r.val_mse);
  }
  lcm::atomic_write_file(base + "/log_pretrain_" + name + ".jsonl", jsonl);
  lcm::atomic_write_file(base + "/log_pretrain_" + name + ".csv", csv);
  lcm::atomic_write_file(base + "/loss_pretrain_" + name + ".svg",
                         lcm::train::svg_line_plot("lcm-pretrain " + name + " (" + kind + "): reconstruction loss",
                                                   "epoch", "MSE", {tr, va}));
}

int pretrain(int argc, char** argv) {
  bool quiet = false;
  lcm::config::Config c = lcm::config::load_config(
      argc, argv,
      "lcm-pretrain: self-supervised pre-training of a computation encoder (model-spec §8).\n"
      "Usage: lcm-pretrain [--config FILE] pretrain.kind=comp_vector|access_matrix "
      "pretrain.files=[a.jsonl.gz,b.jsonl.gz] [key=value ...]\n"
      "Every schedule of every program counts (labels unused, failed/missing times kept). Outputs under "
      "experiment.base_path: weights/{best,last}_autoencoder_<name>.safetensors, "
      "log_pretrain_<name>.{jsonl,csv}, loss_pretrain_<name>.svg; cache in <base_path>/cache.",
      [&](CLI::App& app) { app.add_flag("-q,--quiet", quiet, "no progress output"); });
  std::signal(SIGINT, on_sigint);
  const lcm::DeviceSpec dev = c.training.device;
  lcm::require_device(dev);
  const bool on_cuda = dev.kind == lcm::Device::CUDA;  // the same device switch as lcm-train
  lcm::set_cuda_tf32(c.training.tf32);
  const std::vector<std::string>& files = c.pretrain.files;
  if (files.empty()) throw lcm::config::ConfigError("pretrain.files is empty (pretrain.files=[a.jsonl.gz,b.jsonl.gz])");
  lcm::model::AutoencoderConfig ac;
  ac.kind = c.pretrain.kind;
  lcm::set_num_threads(c.training.threads);
  lcm::train::require_writable_base_path(c);  // before preparing the data: one clear line
  lcm::train::ensure_cache_folder(c);

  // every file prepared like a training split, but keeping unlabeled schedules and every
  // footprint group; one cache file per input file
  std::vector<lcm::data::PreparedSplit> splits;
  for (size_t i = 0; i < files.size(); ++i) {
    lcm::data::PrepareOptions o = lcm::train::prepare_options(c, "train");
    o.source = files[i];
    o.split = "pretrain" + std::to_string(i) + "_" + std::filesystem::path(files[i]).filename().string();
    o.features.keep_unlabeled = true;
    o.batching.min_functions_per_footprint = 0;
    o.progress = !quiet;
    std::error_code ec;
    if (std::filesystem::exists(files[i], ec)) lcm::data::require_regular_data_file(files[i]);  // a directory, a pipe
    if (!std::filesystem::is_regular_file(files[i], ec)) throw std::runtime_error("pretrain.files: file not found: " + files[i]);
    splits.push_back(lcm::data::prepare_split(o));
  }

  // A program name already kept from an earlier file is skipped (program/duplicate_program),
  // counted and named, as a repeat inside one file is: the first file wins.
  lcm::data::SkipLog repeats(c.data.strict, 10);
  std::vector<const lcm::data::Dataset*> datasets;
  for (const auto& s : splits) datasets.push_back(&s.dataset);
  const std::vector<std::vector<char>> keep = lcm::train::skip_repeats_across_files(datasets, files, repeats);
  if (const int64_t n = repeats.count("program", "duplicate_program"); n > 0)
    std::fprintf(stderr,
                 "lcm-pretrain: skipped across files: program/duplicate_program %lld (a program name already "
                 "read in an earlier file of pretrain.files; the first file wins)\n",
                 (long long)n);
  // Per file: the programs and schedules kept (a program skipped as a repeat of an earlier file
  // is not), and every skip by reason, those across files included (also when from the cache).
  for (size_t f = 0; f < splits.size(); ++f) {
    int64_t kept = 0, schedules = 0;
    for (size_t p = 0; p < splits[f].dataset.programs.size(); ++p)
      if (keep[f][p]) ++kept, schedules += splits[f].dataset.programs[p].n_schedules();
    lcm::data::SplitCounts counts = splits[f].counts;
    const int64_t repeated = int64_t(splits[f].dataset.programs.size()) - kept;
    if (repeated > 0) counts.skips["program/duplicate_program"] += repeated;
    std::fprintf(stderr, "lcm-pretrain: %s: %s, %s%s\n%s\n", files[f].c_str(),
                 lcm::data::count_of(kept, "program").c_str(), lcm::data::count_of(schedules, "schedule").c_str(),
                 splits[f].from_cache ? " (from cache)" : "",
                 lcm::train::skip_summary_line("lcm-pretrain", files[f], counts, kept).c_str());
  }

  // samples, split by program (seeded)
  struct ProgramRef {
    int32_t file, program;
  };
  std::vector<ProgramRef> programs;
  for (size_t f = 0; f < splits.size(); ++f)
    for (size_t p = 0; p < splits[f].dataset.programs.size(); ++p)
      if (keep[f][p]) programs.push_back({int32_t(f), int32_t(p)});
  lcm::Rng split_rng(c.training.seed ^ 0x5EEDF00Du);
  lcm::data::fisher_yates(programs, split_rng);
  int64_t n_valid = int64_t(std::llround(c.pretrain.valid_fraction * double(programs.size())));
  if (c.pretrain.valid_fraction > 0 && n_valid == 0 && programs.size() >= 2) n_valid = 1;
  std::vector<Sample> train, valid;
  for (size_t i = 0; i < programs.size(); ++i) {
    const auto& p = splits[size_t(programs[i].file)].dataset.programs[size_t(programs[i].program)];
    auto& dst = int64_t(i) < n_valid ? valid : train;
    const int64_t S = ac.kind == EncoderKind::CompVector ? p.n_schedules() : 1;
    for (int64_t s = 0; s < S; ++s)
      for (int comp = 0; comp < p.n_comps; ++comp) dst.push_back({programs[i].file, programs[i].program, int32_t(s), comp});
  }
  if (train.empty()) throw std::runtime_error("no training samples in pretrain.files");
  std::printf("lcm-pretrain: %s autoencoder on %s, %lld programs (%lld held out), %lld training / %lld validation "
              "samples\n",
              lcm::config::name_of(c.pretrain.kind).c_str(), dev.str().c_str(), (long long)programs.size(), (long long)n_valid,
              (long long)train.size(), (long long)valid.size());

  lcm::model::Autoencoder<float> ae(ac, c.training.seed);
  lcm::AdamOptions ao;
  ao.lr = c.pretrain.lr;
  lcm::Adam<float> opt(lcm::parameter_pointers(ae.params()), ao, false);
  lcm::Rng dropout_rng(c.training.seed ^ 0xD50F7A11u);
  const std::string base = c.experiment.base_path, name = c.experiment.name;
  const std::string best_path = base + "/weights/best_autoencoder_" + name + ".safetensors";
  const std::string last_path = base + "/weights/last_autoencoder_" + name + ".safetensors";
  std::error_code ec;
  std::filesystem::create_directories(base + "/weights", ec);
  if (ec) throw std::runtime_error("cannot create " + base + "/weights: " + ec.message());
  std::string file_list;
  for (auto& f : files) file_list += (file_list.empty() ? "" : ",") + f;
  // CUDA: parameters (and, at the first step, the Adam moments) move to the device once; rows are
  // assembled on the host and copied in by the autoencoder's inputs; checkpoints from the host.
  if (on_cuda) lcm::parameters_to_device(ae.params(), dev.index);
  auto save = [&](const std::string& path, int epoch, double val) {
    if (on_cuda) lcm::parameters_to_host(ae.params());
    lcm::save_parameters(path, ae.params(),
                         {{"lcm.format", "autoencoder"},
                          {"lcm.autoencoder", ac.to_json()},
                          {"lcm.autoencoder_kind", lcm::config::name_of(c.pretrain.kind)},
                          {"lcm.epoch", std::to_string(epoch)},
                          {"lcm.val_mse", lcm::train::format_number(val)},
                          {"lcm.pretrain_files", file_list},
                          {"lcm.experiment", name}});
  };

  const int64_t bs = c.pretrain.batch_size;
  std::vector<int64_t> order(train.size()), vorder(valid.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = int64_t(i);
  for (size_t i = 0; i < vorder.size(); ++i) vorder[i] = int64_t(i);
  lcm::Rng shuffle_rng(c.training.seed ^ 0x5A3F1Eu);
  lcm::Tape<float> tape;
  if (on_cuda) tape.set_device(lcm::Device::CUDA, dev.index);
  std::vector<float> rows, comp_buf;
  std::vector<EpochRecord> history;
  double best = INFINITY;
  const bool tty = !quiet && ::isatty(2);
  std::printf("%6s %14s %14s %9s %12s\n", "epoch", "train_MSE", "val_MSE", "seconds", "samples/s");
  std::fflush(stdout);
  for (int epoch = 0; epoch < c.pretrain.epochs; ++epoch) {
    const auto t0 = Clock::now();
    lcm::data::fisher_yates(order, shuffle_rng);
    const int64_t n_train =
        c.pretrain.max_samples > 0 ? std::min<int64_t>(c.pretrain.max_samples, int64_t(order.size())) : int64_t(order.size());
    double sum = 0;
    for (int64_t b = 0; b < n_train; b += bs) {
      const int64_t e = std::min(n_train, b + bs);
      fill_rows(ac.kind, splits, train, order, b, e, rows, comp_buf);
      tape.clear();
      tape.set_training(true);
      tape.set_grad_enabled(true);
      const lcm::NodeId loss = ae.loss(tape, rows.data(), e - b, dropout_rng);
      const double lv = double(lcm::to_host(tape.value(loss))[0]);  // host or device
      if (!std::isfinite(lv))
        throw std::runtime_error("loss is not finite at epoch " + std::to_string(epoch + 1) + ", sample " + std::to_string(b));
      tape.backward(loss);
      opt.step();
      opt.zero_grad();
      sum += lv * double(e - b);
      if (tty) std::fprintf(stderr, "\r  epoch %d: %lld/%lld samples, MSE %.5f ", epoch + 1, (long long)e, (long long)n_train, sum / double(e));
      if (g_interrupted.load()) break;
    }
    if (tty) std::fprintf(stderr, "\r%70s\r", "");
    if (g_interrupted.load()) {
      save(last_path, epoch, NAN);
      write_logs(base, name, lcm::config::name_of(c.pretrain.kind), history);
      std::fprintf(stderr, "lcm-pretrain: interrupted in epoch %d; saved %s\n", epoch + 1, last_path.c_str());
      return 130;
    }
    const double train_seconds = seconds_since(t0);
    double vsum = 0;
    tape.set_training(false);
    tape.set_grad_enabled(false);
    for (int64_t b = 0; b < int64_t(vorder.size()); b += bs) {
      const int64_t e = std::min(int64_t(vorder.size()), b + bs);
      fill_rows(ac.kind, splits, valid, vorder, b, e, rows, comp_buf);
      tape.clear();
      vsum += double(lcm::to_host(tape.value(ae.loss(tape, rows.data(), e - b, dropout_rng)))[0]) * double(e - b);
    }
    EpochRecord r{epoch + 1, sum / double(n_train), valid.empty() ? NAN : vsum / double(valid.size()),
                  seconds_since(t0), double(n_train) / std::max(1e-9, train_seconds)};
    history.push_back(r);
    // best by validation MSE (by training MSE when nothing is held out); <= keeps the later one
    const double score = valid.empty() ? r.train_mse : r.val_mse;
    const bool is_best = score <= best;
    if (is_best) {
      best = score;
      save(best_path, epoch + 1, r.val_mse);
    }
    save(last_path, epoch + 1, r.val_mse);
    write_logs(base, name, lcm::config::name_of(c.pretrain.kind), history);
    std::printf("%6d %14.6g %14.6g %9.2f %12.1f%s\n", r.epoch, r.train_mse, r.val_mse, r.seconds, r.samples_per_s,
                is_best ? "  *best" : "");
    std::fflush(stdout);
  }
  std::printf("lcm-pretrain: best %s MSE %.6g; weights %s\n", valid.empty() ? "training" : "validation", best,
              best_path.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return lcm::tools::run_tool("lcm-pretrain", [&] { return pretrain(argc, argv); });
}
