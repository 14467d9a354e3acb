// The safetensors file format (https://github.com/huggingface/safetensors, format spec in its
// README): read/write with strict validation, and saving/loading a ParameterStore by name so
// weights move between lcm and PyTorch (docs/design.md "Engine").
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/parameter.hpp"
#include "engine/tensor.hpp"

namespace lcm {

/// Size in bytes of one element of a safetensors dtype ("F32" → 4), or 0 for an unknown dtype.
/// Known: BOOL U8 I8 F8_E5M2 F8_E4M3 (1), I16 U16 F16 BF16 (2), I32 U32 F32 (4), I64 U64 F64 (8).
int64_t safetensors_dtype_size(const std::string& dtype);

/// One tensor of a safetensors file: its dtype name, shape (rank 0 = scalar) and raw
/// little-endian bytes (numel × dtype size of them).
struct SafeTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;

  /// Number of elements (product of the shape; 1 for rank 0).
  int64_t numel() const;
  /// Values converted to float / double / int64. Supported source dtypes: F64, F32, F16, BF16,
  /// I64, I32, I16, I8, U64, U32, U16, U8, BOOL. Throws std::runtime_error naming the dtype for
  /// the F8 types (or anything else), or when bytes.size() != numel × dtype size.
  std::vector<float> to_float() const;
  std::vector<double> to_double() const;
  std::vector<int64_t> to_int64() const;

  /// Builds an F32 / F64 / I64 / I32 tensor of `shape` from numel(shape) values at `data`.
  static SafeTensor from_f32(std::vector<int64_t> shape, const float* data);
  static SafeTensor from_f64(std::vector<int64_t> shape, const double* data);
  static SafeTensor from_i64(std::vector<int64_t> shape, const int64_t* data);
  static SafeTensor from_i32(std::vector<int64_t> shape, const int32_t* data);
};

/// A whole safetensors file: string → string metadata ("__metadata__") and the tensors in file
/// order (the order of the JSON header when read; the data layout order when written).
struct SafeTensorsFile {
  std::map<std::string, std::string> metadata;
  std::vector<std::pair<std::string, SafeTensor>> tensors;

  /// The tensor called `name`, or nullptr.
  const SafeTensor* find(const std::string& name) const;
  /// Appends a tensor (no duplicate check here; write_safetensors refuses duplicates).
  void add(const std::string& name, SafeTensor t) { tensors.emplace_back(name, std::move(t)); }
};

/// Parses the bytes of a safetensors file. `what` names the source in error messages.
/// Layout: u64 little-endian header length N, N bytes of UTF-8 JSON
/// {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}},
/// then the data; offsets are relative to the start of the data. Validation follows the
/// reference implementation: the tensors must tile the data exactly (sorted by offset, no gap, no
/// overlap, nothing after the last one) and end - begin == numel × dtype size.
/// Throws std::runtime_error "safetensors <what>: <reason>" for: fewer than 8 bytes, header
/// length beyond the file or above 100 MB, JSON that does not parse (with the offset), a header
/// entry that is not an object with the three fields, an unknown dtype, a negative or
/// overflowing shape, offsets out of range / overlapping / leaving gaps, a byte count that does
/// not match the shape, a tensor or metadata key given twice (json_duplicate_key), non-string
/// metadata.
SafeTensorsFile parse_safetensors(const std::string& bytes, const std::string& what = "<memory>");

/// Reads and parses a safetensors file (see parse_safetensors). Throws std::runtime_error naming
/// the path when it is a directory, cannot be read or is malformed.
SafeTensorsFile read_safetensors(const std::string& path);

/// Serialises `f` in the reference layout: header JSON ("__metadata__" first when non-empty,
/// then the tensors in vector order with consecutive offsets) padded with spaces to a multiple
/// of 8 bytes. Throws std::invalid_argument for an unknown dtype, a byte count that does not match
/// the shape, an empty, duplicate or "__metadata__" name.
std::string serialize_safetensors(const SafeTensorsFile& f);

/// serialize_safetensors, written atomically (lcm::atomic_write_file). Throws as
/// serialize_safetensors, or std::runtime_error naming the path when the write fails.
void write_safetensors(const std::string& path, const SafeTensorsFile& f);

/// "" when every value of `t` is finite or its dtype is not a floating-point one (F64, F32, F16,
/// BF16); else "<name>: holds N non-finite values (first: element i of M is nan|inf|-inf)". The
/// check every load of weights runs (load_parameters, ensembles, encoder weights, optimizer
/// state): weights with NaN/inf score every schedule as NaN or a constant.
std::string nonfinite_values_problem(const std::string& name, const SafeTensor& t);

/// Throws std::runtime_error "<what>: tensor <nonfinite_values_problem>: the weights are broken
/// (a diverged run?)" for the first tensor of `f` that holds a NaN or ±inf; no-op otherwise.
/// `what` names the file (its path, "ensemble member <path>", ...).
void require_finite_tensors(const SafeTensorsFile& f, const std::string& what);

/// Converts a safetensors shape to a Shape. Throws std::runtime_error for rank > 4 or a negative
/// extent, naming `what`.
Shape to_shape(const std::vector<int64_t>& shape, const std::string& what);
/// The extents of a Shape as a vector.
std::vector<int64_t> shape_vector(const Shape& s);

/// Saves every parameter of `store` (insertion order) under its name, as F32 (T = float) or F64
/// (T = double), with `metadata` plus "format": "pt" (what PyTorch tooling expects) and
/// "lcm.format": "parameters" unless the caller sets them. Atomic. Throws as write_safetensors.
template <class T>
void save_parameters(const std::string& path, const ParameterStore<T>& store,
                     const std::map<std::string, std::string>& metadata = {});

/// Loads values into an existing store by name. Checks, for every tensor, the name (strict:
/// a store parameter absent from the file is "missing", a file tensor absent from the store is
/// "unexpected"; non-strict: both are ignored and missing parameters keep their values), the
/// dtype (F32 for float stores, F64 for double) and the exact shape, e.g.
/// "comps_lstm.weight_ih_l0: shape [720, 180] in file, [720, 200] expected", and the values
/// (nonfinite_values_problem: a NaN or ±inf in a loaded tensor is refused).
/// The problems are listed in one std::runtime_error ("load_parameters <path>: p1; p2; ...", the
/// first 5, then "; ... and N more");
/// the store is unchanged on any error (everything is validated before anything is copied).
/// Returns the file's metadata.
template <class T>
std::map<std::string, std::string> load_parameters(const std::string& path,
                                                   ParameterStore<T>& store, bool strict = true);

}  // namespace lcm
