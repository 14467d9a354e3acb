// Tests of the safetensors reader/writer and ParameterStore save/load: bit-exact round trips,
// a hand-built file per the format spec, every malformed-input kind (clear message, no crash),
// and the published PyTorch-written autoencoder weights in ../shared/data.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "engine/safetensors.hpp"
#include "support/safetensors_support.hpp"
#include "support/test_support.hpp"
#include "util/atomic_file.hpp"

using lcm::test::contains;
using lcm::test::error_of;

using namespace lcm;

namespace {

/// A safetensors byte string built by hand from the format spec: u64 LE length, header, data.
std::string hand_file(const std::string& header, const std::string& data) {
  std::string out;
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(char((n >> (8 * i)) & 0xFF));
  return out + header + data;
}

std::string f32_bytes(std::vector<float> v) {
  return std::string(reinterpret_cast<char*>(v.data()), v.size() * 4);
}

SafeTensorsFile sample_file() {
  SafeTensorsFile f;
  f.metadata["format"] = "pt";
  f.metadata["note \"quoted\""] = "line1\nline2 \xc3\xa9 \\ tab\t";
  float nan_payload;
  uint32_t bits = 0x7FC01234u;
  std::memcpy(&nan_payload, &bits, 4);
  std::vector<float> a = {1.5f,
                          -0.0f,
                          std::numeric_limits<float>::denorm_min(),
                          nan_payload,
                          std::numeric_limits<float>::infinity(),
                          3.14159274f};
  f.add("layer.weight", SafeTensor::from_f32({2, 3}, a.data()));
  std::vector<double> b = {0.1, -1e300, 5e-324};
  f.add("double", SafeTensor::from_f64({3}, b.data()));
  std::vector<int64_t> c = {-5, std::numeric_limits<int64_t>::max()};
  f.add("ints", SafeTensor::from_i64({1, 2}, c.data()));
  std::vector<int32_t> d = {7};
  f.add("scalar", SafeTensor::from_i32({}, d.data()));
  f.add("empty", SafeTensor::from_f32({0, 3}, nullptr));
  SafeTensor u8;
  u8.dtype = "U8";
  u8.shape = {3};
  u8.bytes = std::string("\x00\x7f\xff", 3);
  f.add("bytes", u8);
  return f;
}

}  // namespace

TEST_CASE("safetensors round trip is bit-exact, metadata included") {
  std::string dir = lcm::test::temp_dir("safetensors");
  std::string path = dir + "/rt.safetensors";
  SafeTensorsFile f = sample_file();
  write_safetensors(path, f);
  std::string raw = read_file(path);
  // Layout per spec: header length LE, header padded with spaces to a multiple of 8.
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(raw[size_t(i)]);
  CHECK(n % 8 == 0);
  CHECK(raw[8] == '{');
  CHECK(raw.size() == 8 + n + 24 + 24 + 16 + 4 + 0 + 3);

  SafeTensorsFile g = read_safetensors(path);
  CHECK(g.metadata == f.metadata);
  lcm::test::expect_same_tensors(g, f);
  // Re-serialising what was read gives the same bytes.
  CHECK(serialize_safetensors(g) == raw);
  REQUIRE(g.find("scalar"));
  CHECK(g.find("scalar")->shape.empty());
  CHECK(g.find("scalar")->to_int64() == std::vector<int64_t>{7});
  CHECK(g.find("empty")->numel() == 0);
  CHECK(g.find("absent") == nullptr);
  auto d = g.find("double")->to_double();
  CHECK(d[0] == 0.1);
  CHECK(d[2] == 5e-324);
  CHECK(g.find("ints")->to_int64()[1] == std::numeric_limits<int64_t>::max());
  CHECK(g.find("bytes")->to_float() == std::vector<float>{0.f, 127.f, 255.f});
}

TEST_CASE("safetensors reads a file built by hand from the format spec") {
  // Two F32 tensors and one F16/BF16 each, written as another writer would (metadata last,
  // data not in header order).
  std::string data =
      f32_bytes({4.f, 5.f}) + f32_bytes({1.f, 2.f, 3.f}) + std::string("\x00\x3c\x80\x3f", 4);
  // F16 0x3C00 = 1.0, BF16 0x3F80 = 1.0
  std::string header =
      R"({"b":{"dtype":"F32","shape":[3],"data_offsets":[8,20]},"a":{"dtype":"F32","shape":[2,1],"data_offsets":[0,8]},)"
      R"("h":{"dtype":"F16","shape":[1],"data_offsets":[20,22]},"bf":{"dtype":"BF16","shape":[],"data_offsets":[22,24]},)"
      R"("__metadata__":{"k":"v"}})";
  SafeTensorsFile f = parse_safetensors(hand_file(header, data));
  REQUIRE(f.tensors.size() == 4);
  CHECK(f.tensors[0].first == "b");  // header order kept
  CHECK(f.find("b")->to_float() == std::vector<float>{1.f, 2.f, 3.f});
  CHECK(f.find("a")->to_float() == std::vector<float>{4.f, 5.f});
  CHECK(f.find("a")->shape == std::vector<int64_t>{2, 1});
  CHECK(f.find("h")->to_float() == std::vector<float>{1.f});
  CHECK(f.find("bf")->to_double() == std::vector<double>{1.0});
  CHECK(f.metadata.at("k") == "v");
  // F16 special values: -2 (0xC000), 65504 (0x7BFF), smallest subnormal 2^-24 (0x0001).
  std::string h2 = R"({"x":{"dtype":"F16","shape":[3],"data_offsets":[0,6]}})";
  auto v = parse_safetensors(hand_file(h2, std::string("\x00\xc0\xff\x7b\x01\x00", 6)))
               .find("x")
               ->to_float();
  CHECK(v[0] == -2.f);
  CHECK(v[1] == 65504.f);
  CHECK(v[2] == std::ldexp(1.f, -24));
}

TEST_CASE("safetensors refuses malformed files with a clear message") {
  const std::string ok_header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string ok_data = f32_bytes({1.f, 2.f});
  CHECK_NOTHROW(parse_safetensors(hand_file(ok_header, ok_data)));

  struct Case {
    const char* what;
    std::string bytes;
    const char* expect;
  };
  std::string huge_len(8, '\0');
  huge_len[4] = 1;  // 2^32
  std::string beyond = hand_file(ok_header, ok_data);
  beyond[0] = char(200);  // header length 200 > what follows
  std::vector<Case> cases = {
      {"empty", "", "truncated"},
      {"short length", std::string("\x05\x00\x00", 3), "truncated"},
      {"header beyond file", beyond, "truncated: header length 200"},
      {"header too long", huge_len, "exceeds the 100000000-byte limit"},
      {"bad json", hand_file(R"({"a":{"dtype":"F32",)", ""), "bad header JSON"},
      {"json array", hand_file("[1,2]", ""), "not a JSON object"},
      {"trailing garbage", hand_file(ok_header + "x", ok_data), "bad header JSON"},
      {"offsets out of range",
       hand_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", f32_bytes({1.f})),
       "a: data_offsets [0, 8] out of range: the data section has 4 bytes"},
      {"end before begin",
       hand_file(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", ok_data),
       "end before begin"},
      {"overlap",
       hand_file(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
           ok_data),
       "overlap tensor a"},
      {"gap", hand_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", ok_data),
       "gap of 4 unused bytes"},
      {"trailing data", hand_file(ok_header, ok_data + "abcd"), "4 bytes after the last tensor"},
      {"size vs shape",
       hand_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", ok_data),
       "hold 8 bytes, shape [3] of F32 needs 12"},
      {"unknown dtype",
       hand_file(R"({"a":{"dtype":"F31","shape":[2],"data_offsets":[0,8]}})", ok_data),
       "unknown dtype \"F31\""},
      {"missing dtype", hand_file(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", ok_data),
       "a: missing or non-string \"dtype\""},
      {"negative shape",
       hand_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", ok_data),
       "shape entries must be non-negative"},
      {"bad offsets", hand_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", ok_data),
       "\"data_offsets\" must be two non-negative integers"},
      {"overflowing shape",
       hand_file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
                 ok_data),
       "overflows"},
      {"non-string metadata", hand_file(R"({"__metadata__":{"n":3}})", ""),
       "value of \"n\" is not a string"},
      {"duplicate name",
       hand_file(
           R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
           ok_data),
       "duplicate key \"a\""},
      {"duplicate metadata key",
       hand_file(R"({"__metadata__":{"lcm.calibration":"{}","lcm.calibration":"x"}})", ""),
       "duplicate key \"lcm.calibration\""},
      {"entry not object", hand_file(R"({"a":5})", ""), "a: header entry is not an object"},
  };
  for (auto& c : cases) {
    CAPTURE(c.what);
    std::string msg = error_of([&] { parse_safetensors(c.bytes, "case.safetensors"); });
    CAPTURE(msg);
    CHECK(contains(msg, "safetensors case.safetensors: "));
    CHECK(contains(msg, c.expect));
  }
  // A missing file names the path.
  std::string msg = error_of([] { read_safetensors("/nonexistent/dir/w.safetensors"); });
  CHECK(contains(msg, "/nonexistent/dir/w.safetensors"));
}

TEST_CASE("safetensors: every truncation and corrupted header byte is an error, never a crash") {
  std::string good = serialize_safetensors(sample_file());
  for (size_t len = 0; len < good.size(); ++len) {
    CAPTURE(len);
    std::string msg = error_of([&] { parse_safetensors(good.substr(0, len)); });
    CHECK(!msg.empty());
    CHECK(!contains(msg, "WRONG TYPE"));
  }
  // Flip each header byte to a few values: either parses or throws std::runtime_error.
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(good[size_t(i)]);
  int errors = 0;
  for (size_t i = 8; i < 8 + n; ++i)
    for (char c : {'0', '"', '}', '9', '\xff'}) {
      std::string bad = good;
      bad[i] = c;
      std::string msg = error_of([&] { parse_safetensors(bad); });
      CHECK(!contains(msg, "WRONG TYPE"));
      errors += !msg.empty();
    }
  CHECK(errors > 0);
}

TEST_CASE("write_safetensors refuses inconsistent input") {
  SafeTensorsFile f;
  std::vector<float> v = {1.f, 2.f};
  f.add("a", SafeTensor::from_f32({2}, v.data()));
  f.add("a", SafeTensor::from_f32({2}, v.data()));
  CHECK_THROWS_AS(serialize_safetensors(f), std::invalid_argument);
  f.tensors.pop_back();
  f.tensors[0].second.shape = {3};
  CHECK_THROWS_AS(serialize_safetensors(f), std::invalid_argument);
  f.tensors[0].second.shape = {2};
  f.tensors[0].second.dtype = "F3";
  CHECK_THROWS_AS(serialize_safetensors(f), std::invalid_argument);
  f.tensors[0].second.dtype = "F32";
  f.tensors[0].first = "__metadata__";
  CHECK_THROWS_AS(serialize_safetensors(f), std::invalid_argument);
}

TEST_CASE("SafeTensor conversions refuse what they cannot represent") {
  SafeTensor f8;
  f8.dtype = "F8_E4M3";
  f8.shape = {2};
  f8.bytes = std::string(2, '\x01');
  CHECK(
      contains(error_of([&] { f8.to_float(); }), "conversion from dtype F8_E4M3 is not supported"));
  float nan = std::nanf("");
  SafeTensor t = SafeTensor::from_f32({1}, &nan);
  CHECK(std::isnan(t.to_double()[0]));
  CHECK(contains(error_of([&] { t.to_int64(); }), "out of the int64 range"));
  t.bytes.pop_back();  // 3 bytes for one F32
  CHECK(contains(error_of([&] { t.to_float(); }), "has 3 bytes, 4 expected"));
  CHECK_THROWS_AS(SafeTensor::from_f32({2}, nullptr), std::invalid_argument);
  CHECK(safetensors_dtype_size("BF16") == 2);
  CHECK(safetensors_dtype_size("F128") == 0);
  CHECK_THROWS_AS(to_shape({1, 2, 3, 4, 5}, "x"), std::runtime_error);
}

TEST_CASE("save_parameters / load_parameters round trip and refuse mismatches precisely") {
  std::string dir = lcm::test::temp_dir("safetensors_params");
  std::string path = dir + "/w.safetensors";
  ParameterStore<float> a;
  auto& w = a.add("comps_lstm.weight_ih_l0", Shape{4, 3});
  auto& b = a.add("comps_lstm.bias_ih_l0", Shape{4});
  for (size_t i = 0; i < w.value.size(); ++i) w.value[i] = 0.25f * float(i) - 1.f;
  for (size_t i = 0; i < b.value.size(); ++i) b.value[i] = -float(i) / 3.f;
  save_parameters(path, a, {{"epoch", "7"}});

  SafeTensorsFile raw = read_safetensors(path);
  CHECK(raw.metadata.at("epoch") == "7");
  CHECK(raw.metadata.at("format") == "pt");
  CHECK(raw.tensors[0].first == "comps_lstm.weight_ih_l0");
  CHECK(raw.tensors[0].second.dtype == "F32");

  ParameterStore<float> c;
  c.add("comps_lstm.weight_ih_l0", Shape{4, 3});
  c.add("comps_lstm.bias_ih_l0", Shape{4});
  auto meta = load_parameters(path, c);
  CHECK(meta.at("epoch") == "7");
  CHECK(c.at("comps_lstm.weight_ih_l0").value == w.value);
  CHECK(c.at("comps_lstm.bias_ih_l0").value == b.value);

  // The message of loading `path` into `store` after adding the parameters (name, shape) to it.
  auto load_error = [&](auto& store, const std::vector<std::pair<std::string, Shape>>& params) {
    for (const auto& [name, shape] : params) store.add(name, shape);
    return error_of([&] { load_parameters(path, store); });
  };
  SUBCASE("wrong shape, store unchanged") {
    ParameterStore<float> d;
    auto& dw = d.add("comps_lstm.weight_ih_l0", Shape{4, 5});
    d.add("comps_lstm.bias_ih_l0", Shape{4});
    dw.value.assign(20, 9.f);
    std::string msg = error_of([&] { load_parameters(path, d); });
    CHECK(contains(msg, "comps_lstm.weight_ih_l0: shape [4, 3] in file, [4, 5] expected"));
    CHECK(dw.value == std::vector<float>(20, 9.f));
    CHECK(d.at("comps_lstm.bias_ih_l0").value == std::vector<float>(4, 0.f));  // not loaded either
  }
  SUBCASE("same numel, different rank is still a shape error") {
    ParameterStore<float> d;
    const std::string msg = load_error(
        d, {{"comps_lstm.weight_ih_l0", Shape{12}}, {"comps_lstm.bias_ih_l0", Shape{1, 4}}});
    CHECK(contains(msg, "comps_lstm.weight_ih_l0: shape [4, 3] in file, [12] expected"));
    CHECK(contains(msg, "comps_lstm.bias_ih_l0: shape [4] in file, [1, 4] expected"));
  }
  SUBCASE("missing and unexpected names") {
    ParameterStore<float> d;
    const std::string msg = load_error(
        d, {{"comps_lstm.weight_ih_l0", Shape{4, 3}}, {"nodes_lstm.bias_ih_l0", Shape{4}}});
    CHECK(contains(msg, "comps_lstm.bias_ih_l0: unexpected"));
    CHECK(contains(msg, "nodes_lstm.bias_ih_l0: missing"));
    CHECK(d.at("comps_lstm.weight_ih_l0").value == std::vector<float>(12, 0.f));
    // Non-strict: loads the common one, ignores the rest.
    load_parameters(path, d, /*strict=*/false);
    CHECK(d.at("comps_lstm.weight_ih_l0").value == w.value);
    CHECK(d.at("nodes_lstm.bias_ih_l0").value == std::vector<float>(4, 0.f));
  }
  SUBCASE("wrong dtype") {
    ParameterStore<double> d;
    const std::string msg = load_error(
        d, {{"comps_lstm.weight_ih_l0", Shape{4, 3}}, {"comps_lstm.bias_ih_l0", Shape{4}}});
    CHECK(contains(msg, "comps_lstm.weight_ih_l0: dtype F32 in file, F64 expected"));
  }
  SUBCASE("double store round trip") {
    ParameterStore<double> d, e;
    d.add("x", Shape{2}).value = {0.1, -2.5e-300};
    e.add("x", Shape{2});
    save_parameters(dir + "/d.safetensors", d);
    load_parameters(dir + "/d.safetensors", e);
    CHECK(e.at("x").value == d.at("x").value);
  }
  SUBCASE("a corrupt file leaves the store unchanged") {
    std::string bad = read_file(path);
    atomic_write_file(dir + "/bad.safetensors", bad.substr(0, bad.size() - 3));
    std::string msg = error_of([&] { load_parameters(dir + "/bad.safetensors", c); });
    CHECK(contains(msg, "bad.safetensors"));
    CHECK(c.at("comps_lstm.weight_ih_l0").value == w.value);
  }
}

TEST_CASE("the published access-matrix autoencoder (written by Python safetensors) is read") {
  LCM_REQUIRE_SHARED(path, "pretrained/access_matrix_autoencoder_published.safetensors");
  SafeTensorsFile f = read_safetensors(path);
  // Facts checked with python3's json/struct on the raw header, not with this reader.
  CHECK(f.tensors.size() == 18);
  CHECK(f.metadata.at("format") == "pt");
  CHECK(contains(f.metadata.at("source"), "lstm_autoencoder_perm100_005drop.pt"));
  REQUIRE(f.find("encoder.weight_ih_l0"));
  CHECK(f.find("encoder.weight_ih_l0")->shape == std::vector<int64_t>{80, 44});
  CHECK(f.find("encoder.weight_ih_l1_reverse")->shape == std::vector<int64_t>{80, 40});
  CHECK(f.find("encoder.bias_hh_l1")->shape == std::vector<int64_t>{80});
  REQUIRE(f.find("decoder.weight"));
  CHECK(f.find("decoder.weight")->shape == std::vector<int64_t>{704, 640});
  CHECK(f.find("decoder.weight")->dtype == "F32");
  int64_t encoder = 0;
  for (auto& [name, t] : f.tensors)
    if (name.rfind("encoder.", 0) == 0) encoder += t.numel();
  CHECK(encoder == 20480);  // docs/model-spec.md §8.2
  CHECK(f.find("decoder.weight")->numel() + f.find("decoder.bias")->numel() == 451264);

  auto bias = f.find("decoder.bias")->to_float();
  CHECK(bias[0] == -1.0f);
  CHECK(bias[1] == float(1.4997981786727905));
  CHECK(bias.back() == float(-9.923153811541852e-06));
  auto wih = f.find("encoder.weight_ih_l0")->to_double();
  CHECK(wih[0] == double(float(0.011480394750833511)));
  double sum = 0;
  for (double v : wih) sum += v;
  CHECK(sum == doctest::Approx(84.7899549).epsilon(1e-8));
  double dsum = 0;
  for (float v : f.find("decoder.weight")->to_float()) dsum += v;
  CHECK(dsum == doctest::Approx(-1816.65937).epsilon(1e-8));

  // Loads into a store with the PyTorch names and shapes.
  ParameterStore<float> store;
  for (auto& [name, t] : f.tensors) store.add(name, to_shape(t.shape, name));
  load_parameters(path, store);
  CHECK(store.at("decoder.bias").value[1] == float(1.4997981786727905));
}

TEST_CASE("a safetensors header nested 200,000 deep is one clear error, not a stack overflow") {
  const int depth = 200000;
  const std::string open = R"({"a":)" + std::string(size_t(depth), '[');
  // unclosed (a hostile prefix) and closed (valid JSON): the same error, before any parse
  for (const std::string& header : {open, open + std::string(size_t(depth), ']') + "}"}) {
    const std::string e =
        error_of([&] { parse_safetensors(hand_file(header, ""), "deep.safetensors"); });
    INFO(e.substr(0, 300));
    CHECK(e ==
          "safetensors deep.safetensors: bad header JSON nested deeper than 64 levels (at offset "
          "68)");
  }
  // 64 levels (the limit) still parse as JSON: the error is the header's shape, not its depth
  const std::string ok_depth = R"({"a":)" + std::string(63, '[') + std::string(63, ']') + "}";
  CHECK(contains(error_of([&] { parse_safetensors(hand_file(ok_depth, "")); }),
                 "tensor a: header entry is not an object"));
  // brackets inside strings do not count
  const std::string in_string = R"({"__metadata__":{"k":")" + std::string(1000, '[') + R"("}})";
  CHECK(parse_safetensors(hand_file(in_string, "")).metadata.at("k") == std::string(1000, '['));
}

TEST_CASE("atomic writes use <path>.tmp.<host>.<pid>; a failed create names the path and why") {
  CHECK(lcm::temp_path_for("/a/b.json") ==
        "/a/b.json.tmp." + lcm::temp_host_name() + "." + std::to_string(::getpid()));
  CHECK(lcm::temp_host_name().find('.') == std::string::npos);
  CHECK_FALSE(lcm::temp_host_name().empty());
  const std::string e = error_of([] { lcm::atomic_write_file("/proc/lcm_x", "data"); });
  CHECK(e.rfind("cannot write /proc/lcm_x: ", 0) == 0);
  CHECK(contains(e, "(cannot create a file in /proc: "));
  CHECK_FALSE(contains(e, ".tmp."));
}
