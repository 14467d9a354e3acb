// Memory estimates of lcm-serve requests and the gate that bounds them (see request_memory.hpp).
#include "serve/request_memory.hpp"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <vector>

#include "data/features.hpp"

namespace lcm::serve {

namespace {

/// Nodes of an expression tree (iteratively: a deep tree must not exhaust the stack).
int64_t expression_nodes(const rapidjson::Value& root) {
  int64_t n = 0;
  std::vector<const rapidjson::Value*> todo{&root};
  while (!todo.empty()) {
    const rapidjson::Value* v = todo.back();
    todo.pop_back();
    if (!v->IsObject()) continue;
    ++n;
    const auto c = v->FindMember("children");
    if (c != v->MemberEnd() && c->value.IsArray())
      for (const auto& x : c->value.GetArray()) todo.push_back(&x);
  }
  return n;
}

constexpr size_t kF = sizeof(float);

thread_local size_t t_held = 0;  // bytes this thread holds in reservations

}  // namespace

ProgramShape program_shape(const rapidjson::Value& program, size_t json_bytes) {
  ProgramShape s;
  s.json_bytes = json_bytes;
  if (!program.IsObject()) return s;
  if (const auto it = program.FindMember("iterators");
      it != program.MemberEnd() && it->value.IsObject())
    s.loops = int64_t(it->value.MemberCount());
  const auto cs = program.FindMember("computations");
  if (cs == program.MemberEnd() || !cs->value.IsObject()) return s;
  s.comps = int64_t(cs->value.MemberCount());
  for (const auto& c : cs->value.GetObject()) {
    if (!c.value.IsObject()) continue;
    if (const auto a = c.value.FindMember("accesses");
        a != c.value.MemberEnd() && a->value.IsArray())
      s.accesses += int64_t(a->value.Size());
    if (const auto e = c.value.FindMember("expression_representation"); e != c.value.MemberEnd())
      s.expr_nodes += expression_nodes(e->value);
  }
  return s;
}

// The coefficients below follow the forward of docs/model-spec.md §5 (widths from the model's
// configuration) with factors for the values each layer keeps on the tape (inputs, pre-activation,
// activation, LSTM gates and states); tests/test_serve_memory.cpp checks them against the arena's
// measured peak over generated programs of 3 to 600 computations and 1 to 512 schedules.
RequestMemory::RequestMemory(const lcm::model::ModelConfig& mc, int members) {
  const size_t layers = size_t(
      std::accumulate(mc.comp_embed_layer_sizes.begin(), mc.comp_embed_layer_sizes.end(), 0));
  const size_t h0 = mc.comp_embed_layer_sizes.empty() ? 0 : size_t(mc.comp_embed_layer_sizes[0]);
  const size_t e = size_t(mc.embed_size()), ht = size_t(mc.lstm_embedding_size),
               ex = size_t(mc.expr_embed_size);
  shared_rows_ = mc.encoder.kind == lcm::model::EncoderKind::None;
  // (schedule, computation): its 910-column batch row and input leaves, the tag BiLSTM over 4
  // steps in 2 directions (gates 4·Ht, states, outputs), every MLP layer's output and activation
  // (and their dropout/concat copies), the descriptor.
  per_comp_row_ = kF * (2 * data::kCompVectorWidth + 4 * data::kMaxTags + 2 * 4 * 6 * ht +
                        3 * layers + 2 * h0) +
                  256;
  // Without cached rows (a pre-trained encoder) every schedule also runs the computation's
  // expression LSTM and its encoder.
  if (!shared_rows_) per_comp_row_ += kF * (size_t(data::kMaxExprLen) * 12 * ex + 8 * 1024);
  // (schedule, loop): its loop vector, the tree LSTM cell (gates 4E, states) and the concat /
  // regression layers at each node.
  per_loop_node_ = kF * (data::kLoopVectorWidth + 12 * e + 2 * layers) + 128;
  // Per-program rows (cache miss): the static columns and expression rows, the expression LSTM
  // over 66 steps (gates 4·Ex, states, outputs) and the first layer's output.
  per_comp_rows_ = kF * (2 * (data::kCompVectorWidth + data::kMaxExprLen * data::kExprNodeWidth) +
                         size_t(data::kMaxExprLen) * 12 * ex + 4 * h0);
  row_bytes_ = shared_rows_ ? kF * h0 * size_t(std::max(members, 1)) : 0;
  relative_ = mc.relative_to_identity;
}

int64_t RequestMemory::rows_per_forward() const {
  return int64_t(std::max<size_t>(1, kRowsForwardBytes / std::max<size_t>(per_comp_rows_, 1)));
}

size_t RequestMemory::json_bytes(std::string_view text) {
  size_t values = 1, members = 0;
  for (const char ch : text) {
    values += ch == ',' || ch == '[' || ch == '{';
    members += ch == ':';
  }
  // values and members, every string copied (at most the text), the allocator's 64 KiB chunks
  // and the parse stack
  return 16 * values + 32 * members + text.size() + (size_t(1) << 20);
}

size_t RequestMemory::entry_bytes(const ProgramShape& p) const {
  const size_t c = size_t(p.comps), l = size_t(p.loops);
  // features twice (all of schedule 0, and the query's copy): the 910-column static rows and the
  // 66×11 expression rows per computation; the loop tree; the parsed program (names, bounds,
  // access matrices, expression trees); the key strings; the rows.
  return 2 * c * kF * (data::kCompVectorWidth + data::kMaxExprLen * data::kExprNodeWidth) +
         l * 512 + c * 2048 + size_t(p.accesses) * 512 + size_t(p.expr_nodes) * 64 +
         2 * p.json_bytes + c * row_bytes_ + 4096;
}

size_t RequestMemory::build_bytes(const ProgramShape& p) const {
  const size_t c = size_t(p.comps);
  // the entry, the record text and its parse, schedule 0's batch and its input leaves
  size_t b = entry_bytes(p) + p.json_bytes + p.dom_bytes +
             3 * c * kF * (data::kCompVectorWidth + data::kMaxExprLen * data::kExprNodeWidth) +
             (1 << 20);
  // the per-program rows, rows_per_forward() computations at a time
  if (shared_rows_) b += std::min(c, size_t(rows_per_forward())) * per_comp_rows_;
  // a relative model's forward of the untransformed schedule (all computations at once)
  if (relative_ || !shared_rows_)
    b += c * (per_comp_rows_ + per_comp_row_) + size_t(p.loops) * per_loop_node_;
  return b;
}

size_t RequestMemory::forward_bytes(const ProgramShape& p, int64_t schedules) const {
  const size_t b = size_t(std::max<int64_t>(schedules, 0));
  return b * (size_t(p.comps) * per_comp_row_ + size_t(p.loops) * per_loop_node_ + 1024) +
         size_t(p.comps) * kF * data::kMaxExprLen * data::kExprNodeWidth + (1 << 20);
}

std::string request_too_large_message(const std::string& what, size_t estimate, size_t available,
                                      size_t bound) {
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "request_too_large: %s: estimated %.1f MiB > %.1f MiB available of the bound "
                "%.0f MiB (lcm-serve --max-request-memory)",
                what.c_str(), double(estimate) / double(1 << 20),
                double(available) / double(1 << 20), double(bound) / double(1 << 20));
  return buf;
}

void MemoryGate::acquire(size_t bytes, const std::function<size_t()>& cached,
                         const std::function<bool()>& evict) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    lock.unlock();
    size_t c = cached();
    lock.lock();
    if (fixed_ + c + reserved_ + bytes <= bound_) break;
    if (c > 0) {
      lock.unlock();
      const bool dropped = evict();
      lock.lock();
      if (dropped) continue;
    }
    // nothing more to evict: wait for other requests, or go ahead when there are none
    if (reserved_ <= t_held) break;
    cv_.wait(lock);
  }
  reserved_ += bytes;
  t_held += bytes;
}

void MemoryGate::release(size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    reserved_ -= std::min(bytes, reserved_);
    t_held -= std::min(bytes, t_held);
  }
  cv_.notify_all();
}

size_t MemoryGate::held_by_this_thread() {
  return t_held;
}

size_t MemoryGate::reserved() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reserved_;
}

}  // namespace lcm::serve
