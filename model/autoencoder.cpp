// The docs/model-spec.md §8 autoencoders (model/autoencoder.hpp): input assembly with the §3.10
// thresholding, the encoder parameters/forward shared with the cost model, the decoders and the MSE
// loss. Identical rows are encoded once and broadcast; inputs are assembled on the host and copied
// to a CUDA tape.
#include "model/autoencoder.hpp"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/init.hpp"
#include "engine/lstm.hpp"
#include "engine/ops.hpp"
#include "model/metadata_json.hpp"
#include "model/tape_input.hpp"
#include "util/name_table.hpp"

namespace lcm::model {

namespace {

// column ranges of the 910-wide computation vector (§3.2, §3.9) and of the 1636-wide §8.1 input
constexpr int kFirst = 33;
constexpr int kTagsBegin = 33, kNumTags = 4, kTagWidth = 16,
              kTagSteps = 9;  // 4 tags + 5 zero steps
constexpr int kDomainBegin = 97, kDomainWidth = 110;
constexpr int kWriteBegin = 207, kWriteWidth = 43;
constexpr int kReadsBegin = 250, kReads = 15, kReadWidth = 44;
constexpr int kCompWidth = 910;
constexpr int kExprSteps = 66, kExprWidth = 11;

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument("Autoencoder: " + what);
}

/// Groups the n rows of `rows` (row stride `stride`) by the bytes of columns [begin, begin+width):
/// `unique` = first row of each distinct content, `inverse` [n] = its group per row.
void dedupe(const float* rows, int64_t n, int64_t stride, int64_t begin, int64_t width,
            std::vector<int64_t>& unique, std::vector<int64_t>& inverse) {
  std::unordered_map<std::string, int64_t> seen;
  seen.reserve(size_t(n));
  unique.clear();
  inverse.assign(size_t(n), 0);
  for (int64_t r = 0; r < n; ++r) {
    std::string key(reinterpret_cast<const char*>(rows + r * stride + begin),
                    sizeof(float) * size_t(width));
    auto it = seen.emplace(std::move(key), int64_t(unique.size())).first;
    if (it->second == int64_t(unique.size())) unique.push_back(r);
    inverse[size_t(r)] = it->second;
  }
}

/// A constant [shape] leaf filled with columns [begin, begin+width) of the selected rows
/// (all n rows when `pick` is empty), converted to T (on the tape's device).
template <class T>
NodeId columns(Tape<T>& t, const float* rows, int64_t n, int64_t stride, int64_t begin,
               int64_t width, const std::vector<int64_t>& pick, Shape shape) {
  const int64_t m = pick.empty() ? n : int64_t(pick.size());
  if (shape.numel() != m * width) bad("internal: column block does not fill " + shape.str());
  return make_input(t, shape, [&](T* o) {
    for (int64_t i = 0; i < m; ++i) {
      const float* src = rows + (pick.empty() ? i : pick[size_t(i)]) * stride + begin;
      for (int64_t j = 0; j < width; ++j) o[i * width + j] = T(src[j]);
    }
  });
}

template <class T>
NodeId dense(Tape<T>& t, ParameterStore<T>& s, NodeId x, const std::string& name) {
  return ops::linear(t, x, t.param(s.at(name + ".weight")), t.param(s.at(name + ".bias")));
}

template <class T>
void add_linear(ParameterStore<T>& s, const std::string& name, int in, int out, Rng& rng) {
  Parameter<T>& w = s.add(name + ".weight", Shape{out, in});
  Parameter<T>& b = s.add(name + ".bias", Shape{out});
  pytorch_linear_default(w, &b, rng);
}

LstmSpec tags_spec(const CompVectorAeSizes& z) {
  return LstmSpec{kTagWidth, z.tags_hidden, 1, true};
}
LstmSpec expr_spec(const CompVectorAeSizes& z) {
  return LstmSpec{kExprWidth, z.expr_hidden, 1, false};
}
LstmSpec access_spec(const AccessAeSizes& z) {
  return LstmSpec{kAccessStepWidth, z.hidden, 2, true};
}

/// The sizes of the §8.1 encoder by their lcm.autoencoder metadata names, in the order written
/// (to_json and from_json read the one list). C: CompAeConfig, const or not.
template <class C>
auto comp_fields(C& c) {
  using P = decltype(&c.first);
  return std::array<std::pair<const char*, P>, 11>{{{"first", &c.first},
                                                    {"tags_hidden", &c.tags_hidden},
                                                    {"domain", &c.domain},
                                                    {"write", &c.write},
                                                    {"read", &c.read},
                                                    {"reads", &c.reads},
                                                    {"expr_hidden", &c.expr_hidden},
                                                    {"bottleneck_hidden", &c.bottleneck_hidden},
                                                    {"embedding", &c.embedding},
                                                    {"decoder_hidden0", &c.decoder_hidden0},
                                                    {"decoder_hidden1", &c.decoder_hidden1}}};
}

}  // namespace

namespace {
constexpr NameRow<EncoderKind> kEncoderKindNames[] = {{EncoderKind::None, "none"},
                                                      {EncoderKind::CompVector, "comp_vector"},
                                                      {EncoderKind::AccessMatrix, "access_matrix"}};
}  // namespace

EncoderKind parse_encoder_kind(const std::string& text) {
  EncoderKind k = EncoderKind::None;
  if (value_of(kEncoderKindNames, text, &k)) return k;
  throw std::invalid_argument("unknown encoder kind '" + text +
                              "' (expected none|comp_vector|access_matrix)");
}

std::string encoder_kind_name(EncoderKind k) {
  return name_of(kEncoderKindNames, k, "none");
}

float log10_threshold(float x) {
  const float a = std::fabs(x);
  if (!(a >= 10.0f)) return x;  // also NaN
  return x < 0 ? -std::log10(a) : std::log10(a);
}

void comp_vector_ae_input(const float* comp, const float* expr, float* out) {
  for (int i = 0; i < kCompWidth; ++i) out[i] = log10_threshold(comp[i]);
  for (int i = 0; i < kExprSteps * kExprWidth; ++i) out[kCompWidth + i] = log10_threshold(expr[i]);
}

void access_ae_input(const float* comp, float* out) {
  out[0] = -1.0f;
  std::memcpy(out + 1, comp + kWriteBegin, sizeof(float) * kWriteWidth);
  std::memcpy(out + kAccessStepWidth, comp + kReadsBegin, sizeof(float) * kReads * kReadWidth);
}

void CompVectorAeSizes::validate() const {
  const std::pair<const char*, int> w[] = {{"first", first},
                                           {"tags_hidden", tags_hidden},
                                           {"domain", domain},
                                           {"write", write},
                                           {"read", read},
                                           {"reads", reads},
                                           {"expr_hidden", expr_hidden},
                                           {"bottleneck_hidden", bottleneck_hidden},
                                           {"embedding", embedding},
                                           {"decoder_hidden0", decoder_hidden0},
                                           {"decoder_hidden1", decoder_hidden1}};
  for (auto& [name, v] : w)
    if (v < 1)
      bad(std::string("comp_vector size ") + name + " must be >= 1, got " + std::to_string(v));
}

void AccessAeSizes::validate() const {
  if (hidden < 1) bad("access_matrix hidden must be >= 1, got " + std::to_string(hidden));
}

int AutoencoderConfig::input_width() const {
  if (kind == EncoderKind::CompVector) return kCompAeInputWidth;
  if (kind == EncoderKind::AccessMatrix) return kAccessInputWidth;
  bad("kind none has no input");
}

int AutoencoderConfig::embedding_width() const {
  if (kind == EncoderKind::CompVector) return comp.embedding;
  if (kind == EncoderKind::AccessMatrix) return access.embedding();
  bad("kind none has no embedding");
}

std::string AutoencoderConfig::to_json() const {
  MetadataWriter m;
  auto& w = m.w;
  w.Key("kind");
  w.String(encoder_kind_name(kind).c_str());
  w.Key("input_width");
  w.Int(kind == EncoderKind::None ? 0 : input_width());
  w.Key("embedding_width");
  w.Int(kind == EncoderKind::None ? 0 : embedding_width());
  if (kind == EncoderKind::CompVector) {
    for (auto& [k, v] : comp_fields(comp)) {
      w.Key(k);
      w.Int(*v);
    }
  } else if (kind == EncoderKind::AccessMatrix) {
    w.Key("hidden");
    w.Int(access.hidden);
  }
  return m.text();
}

AutoencoderConfig AutoencoderConfig::from_json(const std::string& text) {
  rapidjson::Document d;
  parse_metadata_object(d, text, "lcm.autoencoder");
  const char* kind = metadata_string(d, "lcm.autoencoder", "kind");
  AutoencoderConfig c;
  try {
    c.kind = parse_encoder_kind(kind);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(std::string("lcm.autoencoder.kind: ") + e.what());
  }
  auto get = [&](const char* k, int& out) {
    if (!d.HasMember(k)) return;
    if (!d[k].IsInt())
      throw std::runtime_error(std::string("lcm.autoencoder.") + k + ": not an int");
    out = d[k].GetInt();
  };
  for (auto& [k, v] : comp_fields(c.comp)) get(k, *v);
  get("hidden", c.access.hidden);
  try {
    c.comp.validate();
    c.access.validate();
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(std::string("lcm.autoencoder: ") + e.what());
  }
  return c;
}

template <class T>
void add_encoder_parameters(ParameterStore<T>& s, const AutoencoderConfig& cfg, Rng& rng) {
  if (cfg.kind == EncoderKind::CompVector) {
    const CompVectorAeSizes& z = cfg.comp;
    z.validate();
    add_linear(s, "encoder.first_part", kFirst, z.first, rng);
    add_linear(s, "encoder.encode_vectors", kTagWidth, kTagWidth, rng);
    add_lstm_parameters(s, "encoder.transformation_vectors_embed", tags_spec(z), &rng);
    add_linear(s, "encoder.domain", kDomainWidth, z.domain, rng);
    add_linear(s, "encoder.write_access", kWriteWidth, z.write, rng);
    add_linear(s, "encoder.read_access", kReadWidth, z.read, rng);
    add_linear(s, "encoder.read_accesses", kReads * z.read, z.reads, rng);
    add_lstm_parameters(s, "encoder.exprs_embed", expr_spec(z), &rng);
    add_linear(s, "encoder.bottleneck.0", z.concat_width(), z.bottleneck_hidden, rng);
    add_linear(s, "encoder.bottleneck.1", z.bottleneck_hidden, z.embedding, rng);
  } else if (cfg.kind == EncoderKind::AccessMatrix) {
    cfg.access.validate();
    add_lstm_parameters(s, "encoder", access_spec(cfg.access), &rng);
  } else {
    bad("add_encoder_parameters: kind none has no encoder");
  }
}

template <class T>
NodeId encode(Tape<T>& t, ParameterStore<T>& s, const AutoencoderConfig& cfg, const float* rows,
              int64_t n, bool dropout, Rng& rng) {
  if (n < 1) bad("encode: needs at least one row, got " + std::to_string(n));
  std::vector<int64_t> uniq, inv;
  if (cfg.kind == EncoderKind::AccessMatrix) {
    const int64_t W = kAccessInputWidth;
    dedupe(rows, n, W, 0, W, uniq, inv);
    const int64_t U = int64_t(uniq.size());
    const NodeId x = columns(t, rows, n, W, 0, W, uniq, Shape{U, kAccessSteps, kAccessStepWidth});
    const LstmSpec spec = access_spec(cfg.access);
    const NodeId out =
        ops::lstm(t, x, spec, lstm_weight_nodes(t, s, "encoder", spec)).output;  // [U, 16, 2H]
    NodeId y = ops::reshape(t, out, Shape{U, int64_t(cfg.access.embedding())});
    if (U != n) y = ops::index_select(t, y, 0, inv);
    return y;  // [n, 640]
  }
  if (cfg.kind != EncoderKind::CompVector) bad("encode: kind none has no encoder");
  const CompVectorAeSizes& z = cfg.comp;
  const int64_t W = kCompAeInputWidth;
  // first part, iteration domain, write block: plain projections (no activation, §8.1)
  const NodeId first =
      dense(t, s, columns(t, rows, n, W, 0, kFirst, {}, Shape{n, kFirst}), "encoder.first_part");
  const NodeId domain =
      dense(t, s, columns(t, rows, n, W, kDomainBegin, kDomainWidth, {}, Shape{n, kDomainWidth}),
            "encoder.domain");
  const NodeId write =
      dense(t, s, columns(t, rows, n, W, kWriteBegin, kWriteWidth, {}, Shape{n, kWriteWidth}),
            "encoder.write_access");
  // read blocks: Linear 44→read on each, flatten, Linear 15·read→reads
  NodeId reads = dense(
      t, s,
      columns(t, rows, n, W, kReadsBegin, kReads * kReadWidth, {}, Shape{n, kReads, kReadWidth}),
      "encoder.read_access");
  reads = dense(t, s, ops::reshape(t, reads, Shape{n, int64_t(kReads) * z.read}),
                "encoder.read_accesses");
  // tags: 4 vectors + 5 zero vectors (§3.9 pad=True), Linear 16→16 per step, BiLSTM, per-sample
  // [forward h_T | backward h after step 0] (Q7: intended, not the reference's reshape)
  dedupe(rows, n, W, kTagsBegin, kNumTags * kTagWidth, uniq, inv);
  int64_t U = int64_t(uniq.size());
  const NodeId tags_in = make_input(t, Shape{U, kTagSteps, kTagWidth}, [&](T* o) {
    std::fill(o, o + U * kTagSteps * kTagWidth, T(0));
    for (int64_t u = 0; u < U; ++u)
      for (int j = 0; j < kNumTags * kTagWidth; ++j)
        o[u * kTagSteps * kTagWidth + j] = T(rows[uniq[size_t(u)] * W + kTagsBegin + j]);
  });
  const LstmSpec ts = tags_spec(z);
  const NodeId enc = dense(t, s, tags_in, "encoder.encode_vectors");
  const LstmOutputs to =
      ops::lstm(t, enc, ts, lstm_weight_nodes(t, s, "encoder.transformation_vectors_embed", ts));
  const int64_t Ht = z.tags_hidden;
  NodeId tags = ops::concat(t,
                            {ops::reshape(t, ops::slice(t, to.h_n, 0, 0, 1), Shape{U, Ht}),
                             ops::reshape(t, ops::slice(t, to.h_n, 0, 1, 1), Shape{U, Ht})},
                            1);
  if (U != n) tags = ops::index_select(t, tags, 0, inv);
  // expression: LSTM over all 66 steps (Q8), final hidden
  dedupe(rows, n, W, kCompWidth, kExprSteps * kExprWidth, uniq, inv);
  U = int64_t(uniq.size());
  const NodeId ex_in = columns(t, rows, n, W, kCompWidth, kExprSteps * kExprWidth, uniq,
                               Shape{U, kExprSteps, kExprWidth});
  const LstmSpec es = expr_spec(z);
  NodeId expr = ops::reshape(
      t, ops::lstm(t, ex_in, es, lstm_weight_nodes(t, s, "encoder.exprs_embed", es)).h_n,
      Shape{U, int64_t(z.expr_hidden)});
  if (U != n) expr = ops::index_select(t, expr, 0, inv);
  // [15, 200, 50, 20, 150, 100] → 535 → 450 (ELU, Dropout 0.1) → 350 (Dropout 0.05, linear
  // bottleneck)
  NodeId h = ops::concat(t, {first, tags, domain, write, reads, expr}, 1);
  h = ops::dropout(t, ops::elu(t, dense(t, s, h, "encoder.bottleneck.0")), dropout ? 0.1 : 0.0,
                   rng);
  h = ops::dropout(t, dense(t, s, h, "encoder.bottleneck.1"), dropout ? 0.05 : 0.0, rng);
  return h;  // [n, 350]
}

template <class T>
Autoencoder<T>::Autoencoder(const AutoencoderConfig& cfg, uint64_t seed) : cfg_(cfg) {
  Rng rng(seed);
  add_encoder_parameters(store_, cfg_, rng);
  if (cfg_.kind == EncoderKind::CompVector) {
    const CompVectorAeSizes& z = cfg_.comp;
    add_linear(store_, "decoder.0", z.embedding, z.decoder_hidden0, rng);
    add_linear(store_, "decoder.1", z.decoder_hidden0, z.decoder_hidden1, rng);
    add_linear(store_, "decoder.2", z.decoder_hidden1, kCompAeInputWidth, rng);
  } else {
    add_linear(store_, "decoder", cfg_.access.embedding(), kAccessInputWidth, rng);
  }
}

template <class T>
NodeId Autoencoder<T>::reconstruct(Tape<T>& t, const float* rows, int64_t n, Rng& rng) {
  NodeId h = encode(t, store_, cfg_, rows, n, true, rng);
  if (cfg_.kind == EncoderKind::AccessMatrix) {
    h = ops::dropout(t, h, 0.05, rng);
    return dense(t, store_, h, "decoder");  // [n, 704] = 16 × 44
  }
  h = ops::dropout(t, ops::elu(t, dense(t, store_, h, "decoder.0")), 0.05, rng);
  h = ops::dropout(t, ops::elu(t, dense(t, store_, h, "decoder.1")), 0.05, rng);
  return dense(t, store_, h, "decoder.2");  // [n, 1636]
}

template <class T>
NodeId Autoencoder<T>::loss(Tape<T>& t, const float* rows, int64_t n, Rng& rng) {
  const NodeId rec = reconstruct(t, rows, n, rng);
  const int64_t W = cfg_.input_width();
  const NodeId target = columns(t, rows, n, W, 0, W, {}, Shape{n, W});
  return ops::mse(t, rec, target);
}

namespace {

/// The rows with the entries of `mask` set to 0 (the masked views of masked_loss and
/// contrastive_loss).
std::vector<float> masked_rows(const float* rows, int64_t entries,
                               const std::vector<uint8_t>& mask) {
  std::vector<float> v(rows, rows + entries);
  for (int64_t i = 0; i < entries; ++i)
    if (mask[size_t(i)]) v[size_t(i)] = 0.0f;
  return v;
}

/// For every row, the index of the first row with the same W input values (itself when none
/// before it): rows with the same representative are each other's positives.
std::vector<int64_t> same_rows(const float* rows, int64_t n, int64_t W) {
  std::unordered_map<uint64_t, std::vector<int64_t>> by_hash;
  std::vector<int64_t> rep(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const float* r = rows + i * W;
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the bytes of the row
    const auto* b = reinterpret_cast<const unsigned char*>(r);
    for (int64_t k = 0; k < W * int64_t(sizeof(float)); ++k) h = (h ^ b[k]) * 1099511628211ull;
    rep[size_t(i)] = i;
    for (int64_t j : by_hash[h])
      if (std::memcmp(rows + j * W, r, size_t(W) * sizeof(float)) == 0) {
        rep[size_t(i)] = j;
        break;
      }
    if (rep[size_t(i)] == i) by_hash[h].push_back(i);
  }
  return rep;
}

}  // namespace

std::vector<uint8_t> draw_mask(int64_t entries, int64_t width, double rate, Rng& rng) {
  if (!(rate > 0.0 && rate < 1.0)) bad("mask rate must be in (0, 1), got " + std::to_string(rate));
  if (width < 1 || entries < 0 || entries % width != 0)
    bad("mask of " + std::to_string(entries) + " entries is not whole rows of " +
        std::to_string(width));
  std::vector<uint8_t> m(static_cast<size_t>(entries));
  for (int64_t r = 0; r < entries; r += width) {
    bool any = false;
    for (int64_t k = 0; k < width; ++k) {
      const bool on = rng.next_double() < rate;
      m[size_t(r + k)] = on ? 1 : 0;
      any = any || on;
    }
    if (!any) m[size_t(r)] = 1;
  }
  return m;
}

template <class T>
NodeId Autoencoder<T>::masked_loss(Tape<T>& t, const float* rows, int64_t n,
                                   const std::vector<uint8_t>& mask, Rng& rng) {
  const int64_t W = cfg_.input_width();
  if (n < 1 || int64_t(mask.size()) != n * W)
    bad("masked_loss: a mask of " + std::to_string(mask.size()) + " entries for " +
        std::to_string(n) + " rows of " + std::to_string(W));
  int64_t count = 0;
  for (uint8_t m : mask) count += m ? 1 : 0;
  if (count == 0) bad("masked_loss: nothing is masked");
  const std::vector<float> view = masked_rows(rows, n * W, mask);
  const NodeId rec = reconstruct(t, view.data(), n, rng);
  const NodeId target = columns(t, rows, n, W, 0, W, {}, Shape{n, W});
  const NodeId on = make_input(t, Shape{n, W}, [&](T* o) {
    for (int64_t i = 0; i < n * W; ++i) o[i] = mask[size_t(i)] ? T(1) : T(0);
  });
  const NodeId diff = ops::mul(t, ops::add(t, rec, ops::scale(t, target, T(-1))), on);
  return ops::scale(t, ops::sum(t, ops::mul(t, diff, diff)), T(1.0 / double(count)));
}

template <class T>
NodeId Autoencoder<T>::contrastive_loss(Tape<T>& t, const float* rows, int64_t n,
                                        const std::vector<uint8_t>& mask_a,
                                        const std::vector<uint8_t>& mask_b, double temperature,
                                        Rng& rng) {
  const int64_t W = cfg_.input_width();
  if (n < 1 || int64_t(mask_a.size()) != n * W || int64_t(mask_b.size()) != n * W)
    bad("contrastive_loss: masks of " + std::to_string(mask_a.size()) + " and " +
        std::to_string(mask_b.size()) + " entries for " + std::to_string(n) + " rows of " +
        std::to_string(W));
  if (!(temperature > 0.0))
    bad("contrastive_loss: temperature must be > 0, got " + std::to_string(temperature));
  const std::vector<float> va = masked_rows(rows, n * W, mask_a);
  const std::vector<float> vb = masked_rows(rows, n * W, mask_b);
  const NodeId za = ops::tanh(t, encode(t, store_, cfg_, va.data(), n, true, rng));
  const NodeId zb = ops::tanh(t, encode(t, store_, cfg_, vb.data(), n, true, rng));
  const int64_t E = cfg_.embedding_width();
  const T inv = T(1.0 / (double(E) * temperature));
  // row i of s_ab: anchor a_i against every b_j; softmax(target) puts e^30 : 1 on positives
  const std::vector<int64_t> rep = same_rows(rows, n, W);
  constexpr double kPositive = 30.0;
  std::vector<T> target(size_t(n * n));
  std::vector<int32_t> group(size_t(n * n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      target[size_t(i * n + j)] = rep[size_t(i)] == rep[size_t(j)] ? T(kPositive) : T(0);
      group[size_t(i * n + j)] = int32_t(i);
    }
  const NodeId s_ab = ops::reshape(t, ops::scale(t, ops::linear(t, za, zb), inv), Shape{n * n});
  const NodeId s_ba = ops::reshape(t, ops::scale(t, ops::linear(t, zb, za), inv), Shape{n * n});
  // the positives are symmetric, so s_ba's targets are s_ab's
  return ops::scale(
      t, ops::add(t, ops::listnet(t, s_ab, target, group), ops::listnet(t, s_ba, target, group)),
      T(0.5));
}

template class Autoencoder<float>;
template class Autoencoder<double>;
template void add_encoder_parameters<float>(ParameterStore<float>&, const AutoencoderConfig&, Rng&);
template void add_encoder_parameters<double>(ParameterStore<double>&, const AutoencoderConfig&,
                                             Rng&);
template NodeId encode<float>(Tape<float>&, ParameterStore<float>&, const AutoencoderConfig&,
                              const float*, int64_t, bool, Rng&);
template NodeId encode<double>(Tape<double>&, ParameterStore<double>&, const AutoencoderConfig&,
                               const float*, int64_t, bool, Rng&);

}  // namespace lcm::model
