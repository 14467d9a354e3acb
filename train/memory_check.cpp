// The training memory startup check (see memory_check.hpp).
#include "train/memory_check.hpp"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "engine/device.hpp"
#include "engine/device_stream.hpp"
#include "train/checkpoint.hpp"

namespace lcm::train {

namespace {

/// The first number of file `path`, or -1 ("max", absent, unreadable).
long long read_number(const std::string& path) {
  std::ifstream f(path);
  long long v = -1;
  if (f && (f >> v)) return v;
  return -1;
}

std::string gib(size_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", double(b) / double(size_t(1) << 30));
  return buf;
}

}  // namespace

size_t available_host_memory() {
  size_t avail = 0;
  std::ifstream f("/proc/meminfo");
  std::string key;
  size_t kib = 0;
  std::string unit;
  while (f >> key >> kib >> unit)
    if (key == "MemAvailable:") {
      avail = kib * 1024;
      break;
    }
  if (avail == 0) {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) avail = size_t(pages) * size_t(page);
  }
  const long long max = read_number("/sys/fs/cgroup/memory.max"),
                  cur = read_number("/sys/fs/cgroup/memory.current");
  if (max > 0 && cur >= 0) {
    const size_t left = max > cur ? size_t(max - cur) : 0;
    if (avail == 0 || left < avail) avail = left;
  }
  return avail;
}

void require_memory_fits(const std::string& tool, const lcm::model::TrainingMemory& need,
                         size_t available, const std::string& where, const std::string& keys) {
  if (available == 0 || need.total() <= available) return;
  throw std::runtime_error(tool + ": the model and one batch need about " + need.str() +
                           " but only " + gib(available) + " of memory is available (" + where +
                           "): lower " + keys);
}

void check_training_memory(const config::Config& c, const std::string& tool) {
  const lcm::model::TrainingMemory need =
      lcm::model::estimate_training_memory(model_config(c), c.data.batch_size);
  const std::string keys =
      "model.comp_embed_layer_sizes, model.lstm_embedding_size, model.expr_embed_size or "
      "data.batch_size (" +
      std::to_string(c.data.batch_size) + ")";
  if (c.training.device.kind == lcm::Device::CUDA) {
    size_t free_bytes = 0, total = 0;
    lcm::device_memory_info(c.training.device.index, &free_bytes, &total);
    require_memory_fits(tool, need, free_bytes, "free on " + c.training.device.str(), keys);
    // on the host: the parameters, gradients and optimizer state kept there too
    lcm::model::TrainingMemory host = need;
    host.activations = 0;
    require_memory_fits(tool, host, available_host_memory(), "on the host", keys);
    return;
  }
  require_memory_fits(tool, need, available_host_memory(), "on the host", keys);
}

void check_pretraining_memory(const config::Config& c, const std::string& tool) {
  lcm::model::AutoencoderConfig ac;
  ac.kind = c.pretrain.kind;
  const lcm::model::TrainingMemory need =
      lcm::model::estimate_pretraining_memory(ac, c.pretrain.batch_size);
  require_memory_fits(tool, need, available_host_memory(), "on the host",
                      "pretrain.batch_size (" + std::to_string(c.pretrain.batch_size) + ")");
}

}  // namespace lcm::train
