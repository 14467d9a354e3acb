// The safetensors reader/writer (strict validation, clear one-line errors) and ParameterStore
// save/load by parameter name. Header JSON via RapidJSON.
#include "engine/safetensors.hpp"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <stdexcept>
#include <type_traits>

#include "util/atomic_file.hpp"
#include "util/json_parse.hpp"
#include "util/name_table.hpp"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "lcm safetensors I/O assumes a little-endian host"
#endif

namespace lcm {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference implementation's limit

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

/// numel of a shape; false on a negative extent or int64 overflow.
bool checked_numel(const std::vector<int64_t>& shape, int64_t& out) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return false;
    n *= d;
  }
  out = n;
  return true;
}

float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h >> 15) << 31;
  uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: value = mant · 2^-24
      float v = std::ldexp(float(mant), -24);
      return (h >> 15) ? -v : v;
    }
  } else if (exp == 31) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

template <class Src, class Dst>
void convert_raw(const std::string& bytes, std::vector<Dst>& out) {
  size_t n = out.size();
  for (size_t i = 0; i < n; ++i) {
    Src s;
    std::memcpy(&s, bytes.data() + i * sizeof(Src), sizeof(Src));
    if constexpr (std::is_integral_v<Dst> && std::is_floating_point_v<Src>) {
      if (!(s >= -9.2e18 && s <= 9.2e18))
        throw std::runtime_error("safetensors: floating value out of the int64 range (or NaN)");
    }
    out[i] = static_cast<Dst>(s);
  }
}

template <class Dst>
std::vector<Dst> convert(const SafeTensor& t) {
  int64_t size = safetensors_dtype_size(t.dtype);
  int64_t n = t.numel();
  if (size == 0) throw std::runtime_error("safetensors: unknown dtype " + t.dtype);
  if (int64_t(t.bytes.size()) != n * size)
    throw std::runtime_error("safetensors: tensor of shape " + shape_str(t.shape) + " and dtype " +
                             t.dtype + " has " + std::to_string(t.bytes.size()) + " bytes, " +
                             std::to_string(n * size) + " expected");
  std::vector<Dst> out(static_cast<size_t>(n));
  const std::string& d = t.dtype;
  using Convert = void (*)(const std::string&, std::vector<Dst>&);
  static constexpr NameRow<Convert> kPlainDtypes[] = {
      {&convert_raw<float, Dst>, "F32"},    {&convert_raw<double, Dst>, "F64"},
      {&convert_raw<int64_t, Dst>, "I64"},  {&convert_raw<int32_t, Dst>, "I32"},
      {&convert_raw<int16_t, Dst>, "I16"},  {&convert_raw<int8_t, Dst>, "I8"},
      {&convert_raw<uint64_t, Dst>, "U64"}, {&convert_raw<uint32_t, Dst>, "U32"},
      {&convert_raw<uint16_t, Dst>, "U16"}, {&convert_raw<uint8_t, Dst>, "U8"}};
  Convert plain = nullptr;
  if (value_of(kPlainDtypes, d, &plain))
    plain(t.bytes, out);
  else if (d == "BOOL") {
    for (size_t i = 0; i < out.size(); ++i) out[i] = Dst(t.bytes[i] != 0 ? 1 : 0);
  } else if (d == "F16" || d == "BF16") {
    for (size_t i = 0; i < out.size(); ++i) {
      uint16_t h;
      std::memcpy(&h, t.bytes.data() + 2 * i, 2);
      float f;
      if (d == "F16") {
        f = half_to_float(h);
      } else {
        uint32_t bits = uint32_t(h) << 16;
        std::memcpy(&f, &bits, 4);
      }
      if constexpr (std::is_integral_v<Dst>) {
        if (!(f >= -9.2e18f && f <= 9.2e18f))
          throw std::runtime_error("safetensors: " + d + " value out of the int64 range (or NaN)");
      }
      out[i] = static_cast<Dst>(f);
    }
  } else {
    throw std::runtime_error("safetensors: conversion from dtype " + d + " is not supported");
  }
  return out;
}

template <class V>
SafeTensor from_values(const char* dtype, std::vector<int64_t> shape, const V* data) {
  SafeTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  int64_t n = 0;
  if (!checked_numel(t.shape, n))
    throw std::invalid_argument("SafeTensor: bad shape " + shape_str(t.shape));
  if (n > 0) {
    if (!data) throw std::invalid_argument("SafeTensor: null data for shape " + shape_str(t.shape));
    t.bytes.assign(reinterpret_cast<const char*>(data), size_t(n) * sizeof(V));
  }
  return t;
}

}  // namespace

int64_t safetensors_dtype_size(const std::string& d) {
  if (d == "BOOL" || d == "U8" || d == "I8" || d == "F8_E5M2" || d == "F8_E4M3") return 1;
  if (d == "I16" || d == "U16" || d == "F16" || d == "BF16") return 2;
  if (d == "I32" || d == "U32" || d == "F32") return 4;
  if (d == "I64" || d == "U64" || d == "F64") return 8;
  return 0;
}

int64_t SafeTensor::numel() const {
  int64_t n = 0;
  if (!checked_numel(shape, n))
    throw std::runtime_error("SafeTensor: bad shape " + shape_str(shape));
  return n;
}
std::string nonfinite_values_problem(const std::string& name, const SafeTensor& t) {
  const std::string& d = t.dtype;
  if (d != "F64" && d != "F32" && d != "F16" && d != "BF16") return "";
  const size_t size = size_t(safetensors_dtype_size(d));
  const size_t n = t.bytes.size() / size;
  int64_t bad = 0;
  size_t first = 0;
  double first_value = 0;
  for (size_t i = 0; i < n; ++i) {
    const char* b = t.bytes.data() + i * size;
    double v;
    if (d == "F64") {
      std::memcpy(&v, b, 8);
    } else if (d == "F32") {
      float f;
      std::memcpy(&f, b, 4);
      v = f;
    } else {  // F16: exponent bits 14-10 all ones; BF16: bits 14-7
      uint16_t h;
      std::memcpy(&h, b, 2);
      const bool special = d == "F16" ? (h & 0x7C00u) == 0x7C00u : (h & 0x7F80u) == 0x7F80u;
      const bool nan = special && (d == "F16" ? (h & 0x03FFu) != 0 : (h & 0x007Fu) != 0);
      v = !special ? 0.0
          : nan    ? std::numeric_limits<double>::quiet_NaN()
                   : ((h & 0x8000u) ? -1.0 : 1.0) * std::numeric_limits<double>::infinity();
    }
    if (std::isfinite(v)) continue;
    if (bad++ == 0) {
      first = i;
      first_value = v;
    }
  }
  if (bad == 0) return "";
  const char* what = std::isnan(first_value) ? "nan" : first_value > 0 ? "inf" : "-inf";
  return name + ": holds " + std::to_string(bad) + " non-finite value" + (bad == 1 ? "" : "s") +
         " (first: element " + std::to_string(first) + " of " + std::to_string(n) + " is " + what +
         ")";
}

void require_finite_tensors(const SafeTensorsFile& f, const std::string& what) {
  for (const auto& [name, t] : f.tensors) {
    const std::string problem = nonfinite_values_problem(name, t);
    if (!problem.empty())
      throw std::runtime_error(what + ": tensor " + problem +
                               ": the weights are broken (a diverged run?)");
  }
}

std::vector<float> SafeTensor::to_float() const {
  return convert<float>(*this);
}
std::vector<double> SafeTensor::to_double() const {
  return convert<double>(*this);
}
std::vector<int64_t> SafeTensor::to_int64() const {
  return convert<int64_t>(*this);
}
SafeTensor SafeTensor::from_f32(std::vector<int64_t> s, const float* d) {
  return from_values("F32", std::move(s), d);
}
SafeTensor SafeTensor::from_f64(std::vector<int64_t> s, const double* d) {
  return from_values("F64", std::move(s), d);
}
SafeTensor SafeTensor::from_i64(std::vector<int64_t> s, const int64_t* d) {
  return from_values("I64", std::move(s), d);
}
SafeTensor SafeTensor::from_i32(std::vector<int64_t> s, const int32_t* d) {
  return from_values("I32", std::move(s), d);
}

const SafeTensor* SafeTensorsFile::find(const std::string& name) const {
  for (auto& kv : tensors)
    if (kv.first == name) return &kv.second;
  return nullptr;
}

SafeTensorsFile parse_safetensors(const std::string& bytes, const std::string& what) {
  auto fail = [&](const std::string& why) -> std::runtime_error {
    return std::runtime_error("safetensors " + what + ": " + why);
  };
  if (bytes.size() < 8)
    throw fail("truncated: " + std::to_string(bytes.size()) +
               " bytes, the 8-byte header length is missing");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[size_t(i)]);
  if (n > kMaxHeaderBytes)
    throw fail("header length " + std::to_string(n) +
               " exceeds the 100000000-byte limit (not a safetensors file?)");
  if (n > bytes.size() - 8)
    throw fail("truncated: header length " + std::to_string(n) + " but only " +
               std::to_string(bytes.size() - 8) + " bytes follow");
  const char* hdr = bytes.data() + 8;
  if (n == 0 || hdr[0] != '{') throw fail("header is not a JSON object");

  // Iterative parse with a nesting limit (a header nested 200,000 deep is this one error) that
  // refuses a key given twice (a tensor or a metadata key: neither is read one way silently).
  rapidjson::Document doc;
  const std::string why = parse_json_bounded<rapidjson::kParseValidateEncodingFlag>(doc, hdr, n);
  if (!why.empty()) throw fail("bad header JSON " + why);
  if (!doc.IsObject()) throw fail("header is not a JSON object");

  const uint64_t data_size = bytes.size() - 8 - n;
  const char* data = hdr + n;
  SafeTensorsFile f;
  struct Span {
    uint64_t begin, end;
    std::string name;
  };
  std::vector<Span> spans;
  for (auto it = doc.MemberBegin(); it != doc.MemberEnd(); ++it) {
    std::string name(it->name.GetString(), it->name.GetStringLength());
    const rapidjson::Value& v = it->value;
    if (name == "__metadata__") {
      if (!v.IsObject()) throw fail("__metadata__ is not an object");
      for (auto m = v.MemberBegin(); m != v.MemberEnd(); ++m) {
        std::string key(m->name.GetString(), m->name.GetStringLength());
        if (!m->value.IsString())
          throw fail("__metadata__ value of \"" + key + "\" is not a string");
        f.metadata[key] = std::string(m->value.GetString(), m->value.GetStringLength());
      }
      continue;
    }
    if (!v.IsObject()) throw fail("tensor " + name + ": header entry is not an object");
    auto dt = v.FindMember("dtype");
    auto sh = v.FindMember("shape");
    auto off = v.FindMember("data_offsets");
    if (dt == v.MemberEnd() || !dt->value.IsString())
      throw fail("tensor " + name + ": missing or non-string \"dtype\"");
    if (sh == v.MemberEnd() || !sh->value.IsArray())
      throw fail("tensor " + name + ": missing or non-array \"shape\"");
    if (off == v.MemberEnd() || !off->value.IsArray() || off->value.Size() != 2 ||
        !off->value[0].IsUint64() || !off->value[1].IsUint64())
      throw fail("tensor " + name + ": \"data_offsets\" must be two non-negative integers");
    SafeTensor t;
    t.dtype = dt->value.GetString();
    int64_t esize = safetensors_dtype_size(t.dtype);
    if (esize == 0) throw fail("tensor " + name + ": unknown dtype \"" + t.dtype + "\"");
    for (auto& d : sh->value.GetArray()) {
      if (!d.IsInt64() || d.GetInt64() < 0)
        throw fail("tensor " + name + ": shape entries must be non-negative integers");
      t.shape.push_back(d.GetInt64());
    }
    int64_t numel = 0;
    if (!checked_numel(t.shape, numel) || numel > std::numeric_limits<int64_t>::max() / esize)
      throw fail("tensor " + name + ": shape " + shape_str(t.shape) + " overflows");
    uint64_t b = off->value[0].GetUint64(), e = off->value[1].GetUint64();
    if (e < b)
      throw fail("tensor " + name + ": data_offsets [" + std::to_string(b) + ", " +
                 std::to_string(e) + "] end before begin");
    if (e > data_size)
      throw fail("tensor " + name + ": data_offsets [" + std::to_string(b) + ", " +
                 std::to_string(e) + "] out of range: the data section has " +
                 std::to_string(data_size) + " bytes");
    if (e - b != uint64_t(numel * esize))
      throw fail("tensor " + name + ": data_offsets [" + std::to_string(b) + ", " +
                 std::to_string(e) + "] hold " + std::to_string(e - b) + " bytes, shape " +
                 shape_str(t.shape) + " of " + t.dtype + " needs " + std::to_string(numel * esize));
    t.bytes.assign(data + b, size_t(e - b));
    spans.push_back({b, e, name});
    f.tensors.emplace_back(std::move(name), std::move(t));
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t pos = 0;
  std::string prev;
  for (auto& s : spans) {
    if (s.begin < pos)
      throw fail("tensor " + s.name + ": data_offsets [" + std::to_string(s.begin) + ", " +
                 std::to_string(s.end) + "] overlap tensor " + prev);
    if (s.begin > pos)
      throw fail("tensor " + s.name + ": gap of " + std::to_string(s.begin - pos) +
                 " unused bytes before its data_offsets [" + std::to_string(s.begin) + ", " +
                 std::to_string(s.end) + "]");
    pos = s.end;
    prev = s.name;
  }
  if (pos != data_size)
    throw fail(std::to_string(data_size - pos) +
               " bytes after the last tensor are not described by the header");
  return f;
}

SafeTensorsFile read_safetensors(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw std::runtime_error("safetensors " + path + ": is a directory, not a safetensors file");
  return parse_safetensors(read_file(path), path);
}

std::string serialize_safetensors(const SafeTensorsFile& f) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  if (!f.metadata.empty()) {
    w.Key("__metadata__");
    w.StartObject();
    for (auto& kv : f.metadata) {
      w.Key(kv.first.data(), rapidjson::SizeType(kv.first.size()));
      w.String(kv.second.data(), rapidjson::SizeType(kv.second.size()));
    }
    w.EndObject();
  }
  std::set<std::string> names;
  uint64_t offset = 0;
  for (auto& [name, t] : f.tensors) {
    if (name.empty()) throw std::invalid_argument("write_safetensors: empty tensor name");
    if (name == "__metadata__")
      throw std::invalid_argument("write_safetensors: tensor named __metadata__");
    if (!names.insert(name).second)
      throw std::invalid_argument("write_safetensors: duplicate tensor name " + name);
    int64_t esize = safetensors_dtype_size(t.dtype);
    if (esize == 0)
      throw std::invalid_argument("write_safetensors: tensor " + name + ": unknown dtype " +
                                  t.dtype);
    int64_t numel = 0;
    if (!checked_numel(t.shape, numel))
      throw std::invalid_argument("write_safetensors: tensor " + name + ": bad shape " +
                                  shape_str(t.shape));
    if (int64_t(t.bytes.size()) != numel * esize)
      throw std::invalid_argument("write_safetensors: tensor " + name + ": " +
                                  std::to_string(t.bytes.size()) + " bytes, shape " +
                                  shape_str(t.shape) + " of " + t.dtype + " needs " +
                                  std::to_string(numel * esize));
    w.Key(name.data(), rapidjson::SizeType(name.size()));
    w.StartObject();
    w.Key("dtype");
    w.String(t.dtype.data(), rapidjson::SizeType(t.dtype.size()));
    w.Key("shape");
    w.StartArray();
    for (int64_t d : t.shape) w.Int64(d);
    w.EndArray();
    w.Key("data_offsets");
    w.StartArray();
    w.Uint64(offset);
    w.Uint64(offset + t.bytes.size());
    w.EndArray();
    w.EndObject();
    offset += t.bytes.size();
  }
  w.EndObject();
  std::string header(sb.GetString(), sb.GetSize());
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + header.size() + offset);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(char((n >> (8 * i)) & 0xFF));
  out += header;
  for (auto& kv : f.tensors) out += kv.second.bytes;
  return out;
}

void write_safetensors(const std::string& path, const SafeTensorsFile& f) {
  atomic_write_file(path, serialize_safetensors(f));
}

Shape to_shape(const std::vector<int64_t>& s, const std::string& what) {
  if (s.size() > 4)
    throw std::runtime_error(what + ": shape " + shape_str(s) + " has rank " +
                             std::to_string(s.size()) + ", at most 4 supported");
  Shape r;
  for (int64_t d : s) {
    if (d < 0) throw std::runtime_error(what + ": negative extent in shape " + shape_str(s));
    r.dims[size_t(r.rank++)] = d;
  }
  return r;
}

std::vector<int64_t> shape_vector(const Shape& s) {
  return std::vector<int64_t>(s.dims.begin(), s.dims.begin() + s.rank);
}

template <class T>
void save_parameters(const std::string& path, const ParameterStore<T>& store,
                     const std::map<std::string, std::string>& metadata) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  SafeTensorsFile f;
  f.metadata = metadata;
  f.metadata.emplace("format", "pt");
  f.metadata.emplace("lcm.format", "parameters");
  for (const Parameter<T>& p : store.all()) {
    if (int64_t(p.value.size()) != p.numel())
      throw std::invalid_argument("save_parameters: " + p.name + " holds " +
                                  std::to_string(p.value.size()) + " values, shape " +
                                  p.shape.str() + " needs " + std::to_string(p.numel()));
    if constexpr (std::is_same_v<T, float>)
      f.add(p.name, SafeTensor::from_f32(shape_vector(p.shape), p.value.data()));
    else
      f.add(p.name, SafeTensor::from_f64(shape_vector(p.shape), p.value.data()));
  }
  write_safetensors(path, f);
}

template <class T>
std::map<std::string, std::string> load_parameters(const std::string& path,
                                                   ParameterStore<T>& store, bool strict) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  const char* want_dtype = std::is_same_v<T, float> ? "F32" : "F64";
  SafeTensorsFile f = read_safetensors(path);
  std::vector<std::string> problems;
  std::vector<std::pair<Parameter<T>*, const SafeTensor*>> plan;
  std::set<std::string> in_file;
  for (auto& [name, t] : f.tensors) {
    in_file.insert(name);
    Parameter<T>* p = store.find(name);
    if (!p) {
      if (strict) problems.push_back(name + ": unexpected (in file, not a parameter of the model)");
      continue;
    }
    bool ok = true;
    if (t.dtype != want_dtype) {
      problems.push_back(name + ": dtype " + t.dtype + " in file, " + want_dtype + " expected");
      ok = false;
    }
    if (t.shape != shape_vector(p->shape)) {
      problems.push_back(name + ": shape " + shape_str(t.shape) + " in file, " + p->shape.str() +
                         " expected");
      ok = false;
    }
    if (ok) {
      const std::string values = nonfinite_values_problem(name, t);
      if (!values.empty()) {
        problems.push_back(values + ": the weights are broken (a diverged run?)");
        continue;
      }
      plan.emplace_back(p, &t);
    }
  }
  if (strict)
    for (const Parameter<T>& p : store.all())
      if (!in_file.count(p.name))
        problems.push_back(p.name + ": missing (a parameter of the model, not in file)");
  if (!problems.empty()) {
    std::string msg = "load_parameters " + path + ": ";
    const size_t shown = 5;  // a wrong file can have hundreds of problems: the first few say it
    for (size_t i = 0; i < problems.size() && i < shown; ++i) msg += (i ? "; " : "") + problems[i];
    if (problems.size() > shown)
      msg += "; ... and " + std::to_string(problems.size() - shown) + " more";
    throw std::runtime_error(msg);
  }
  for (auto& [p, t] : plan) {
    p->value.resize(size_t(p->numel()));
    std::memcpy(p->value.data(), t->bytes.data(), t->bytes.size());
  }
  return f.metadata;
}

template void save_parameters<float>(const std::string&, const ParameterStore<float>&,
                                     const std::map<std::string, std::string>&);
template void save_parameters<double>(const std::string&, const ParameterStore<double>&,
                                      const std::map<std::string, std::string>&);
template std::map<std::string, std::string> load_parameters<float>(const std::string&,
                                                                   ParameterStore<float>&, bool);
template std::map<std::string, std::string> load_parameters<double>(const std::string&,
                                                                    ParameterStore<double>&, bool);

}  // namespace lcm
