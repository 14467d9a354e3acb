// The JSON of the model's checkpoint metadata entries (lcm.autoencoder, lcm.input_scaling,
// lcm.calibration; docs/run-state.md): reading an entry as one bounded JSON object and writing
// arrays of doubles exactly. Internal to model/.
#pragma once

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "util/json_parse.hpp"

namespace lcm::model {

/// Writes "key": [v…], each double in rapidjson's shortest exact representation (read back with
/// kParseFullPrecisionFlag: the same bits).
inline void write_number_array(rapidjson::Writer<rapidjson::StringBuffer>& w, const char* key,
                               const std::vector<double>& v) {
  w.Key(key);
  w.StartArray();
  for (double x : v) w.Double(x);
  w.EndArray();
}

/// A metadata entry being written: one JSON object, begun by the constructor (with
/// "format_version" as its first member when a version is given); fill it through `w`, then
/// text() ends it and returns its JSON text.
struct MetadataWriter {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w{sb};
  MetadataWriter() { w.StartObject(); }
  explicit MetadataWriter(int format_version) : MetadataWriter() {
    w.Key("format_version");
    w.Int(format_version);
  }
  std::string text() {
    w.EndObject();
    return sb.GetString();
  }
};

/// Parses the metadata entry `name` (e.g. "lcm.autoencoder") into `d`: full precision (the
/// numbers read back are the bits written), iterative with bounded nesting (a hostile value is
/// one error). Throws std::runtime_error "<name> metadata is not a JSON object" (with "(bad JSON
/// …)" when it is no JSON at all).
inline void parse_metadata_object(rapidjson::Document& d, const std::string& text,
                                  const std::string& name) {
  const std::string why = parse_json_bounded<rapidjson::kParseFullPrecisionFlag>(d, text);
  if (!why.empty())
    throw std::runtime_error(name + " metadata is not a JSON object (bad JSON " + why + ")");
  if (!d.IsObject()) throw std::runtime_error(name + " metadata is not a JSON object");
}

/// The string member `key` of the metadata entry `name` parsed into `d`. Throws
/// std::runtime_error "<name>.<key>: missing" when it is absent or not a string.
inline const char* metadata_string(const rapidjson::Document& d, const std::string& name,
                                   const char* key) {
  if (!d.HasMember(key) || !d[key].IsString())
    throw std::runtime_error(name + "." + key + ": missing");
  return d[key].GetString();
}

}  // namespace lcm::model
