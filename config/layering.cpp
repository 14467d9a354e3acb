// Layering of the lcm configuration: setting and reading keys by name (with close-key
// suggestions for typos), YAML files, command-line overrides, the default-file search and the
// listing printed by --help (see config.hpp).
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "config/config.hpp"
#include "util/atomic_file.hpp"

namespace lcm::config {
namespace {

/// The largest config text, in bytes (1 MiB; docs/tools.md): a larger file is a ConfigError
/// before it is read. Parsing a config of this size takes at most about 100 MB (yaml-cpp's tokens
/// of a deeply nested flow collection, which it scans to its end before the depth check can stop
/// it).
constexpr size_t kMaxConfigBytes = size_t(1) << 20;

std::string quote(const std::string& s) {
  return "'" + s + "'";
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] =
          std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string after_dot(const std::string& k) {
  auto p = k.rfind('.');
  return p == std::string::npos ? k : k.substr(p + 1);
}

const ConfigKey* find_key(const std::string& key) {
  for (auto& k : config_keys())
    if (k.key == key) return &k;
  return nullptr;
}

/// Keys within a small edit distance of `key` (typos): at most 2 edits on the whole key (1 for
/// keys under 6 characters), the same last part ("batch_size" → data.batch_size), or at most 1
/// edit on a last part of 4+ characters. At most 3, closest first.
std::vector<std::string> close_keys(const std::string& key) {
  std::vector<std::pair<size_t, std::string>> close;
  const size_t limit = key.size() < 6 ? 1 : 2;
  const std::string tail = after_dot(key);
  for (auto& k : config_keys()) {
    size_t d = edit_distance(key, k.key);
    const std::string ktail = after_dot(k.key);
    if (d <= limit || ktail == tail ||
        (tail.size() >= 4 && ktail.size() >= 4 && edit_distance(tail, ktail) <= 1))
      close.emplace_back(d, k.key);
  }
  std::stable_sort(close.begin(), close.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (size_t i = 0; i < close.size() && i < 3; ++i) out.push_back(close[i].second);
  return out;
}

std::string did_you_mean(const std::vector<std::string>& close) {
  if (close.empty()) return "";
  std::string msg = "; did you mean ";
  for (size_t i = 0; i < close.size(); ++i) msg += (i ? " or " : "") + close[i];
  return msg + "?";
}

[[noreturn]] void unknown_key(const std::string& key, const std::string& origin) {
  std::vector<std::string> close = close_keys(key);
  std::string msg = "unknown config key " + quote(key);
  if (!origin.empty()) msg += " (in " + origin + ")";
  if (!close.empty())
    msg += did_you_mean(close);
  else
    msg += "; see --help for the list of keys";
  throw ConfigError(msg);
}

void set_value(Config& c, const std::string& key, const std::string& value,
               const std::string& origin) {
  const ConfigKey* k = find_key(key);
  if (!k) unknown_key(key, origin);
  try {
    k->set(c, value);
  } catch (const ConfigError& e) {
    if (origin.empty()) throw;
    throw ConfigError(std::string(e.what()) + " (in " + origin + ")");
  }
  if (!origin.empty()) c.given[k->key] = origin;
}

/// `origin` and the 1-based line of `m` ("f.yaml line 3"); `origin` alone without a position.
std::string at_line(const std::string& origin, const YAML::Mark& m) {
  return m.is_null() ? origin : origin + " line " + std::to_string(m.line + 1);
}

/// Where each dotted key of one YAML document was first given (its mark), to refuse repeats.
using SeenKeys = std::map<std::string, YAML::Mark>;

/// Refuses `key` (dotted, at `mark`) when `seen` already has it: YAML requires the keys of a
/// mapping to be unique, and yaml-cpp keeps both entries, so a repeat would silently replace the
/// first value (or, for a repeated section, merge two sections).
void require_unique(SeenKeys& seen, const std::string& key, const YAML::Mark& mark,
                    const std::string& origin) {
  const auto [it, inserted] = seen.emplace(key, mark);
  if (inserted) return;
  std::string first =
      it->second.is_null() ? "" : " (first at line " + std::to_string(it->second.line + 1) + ")";
  throw ConfigError("duplicate config key " + quote(key) + " in " + at_line(origin, mark) + first +
                    ": give each key once");
}

/// Walks the parser's events of a config text, before any node is built, and refuses what
/// would make building or applying the nodes unbounded: an alias inside the collection it names
/// (`training: &t` then `  x: *t`: a cycle that recursion through the node never leaves), and
/// nesting deeper than kMaxConfigDepth, counting the depth an alias brings with it (an alias of
/// a 10-deep collection nested 10 deep is 20 deep). Throws ConfigError naming `origin` and the
/// line. The events come while yaml-cpp descends, so a deeper text is stopped at the limit
/// instead of at yaml-cpp's own 2000 levels of recursion.
class ConfigShapeCheck : public YAML::EventHandler {
 public:
  explicit ConfigShapeCheck(const std::string& origin) : origin_(origin) {}

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t a) override { leaf(m, a); }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t a,
                const std::string&) override {
    leaf(m, a);
  }
  void OnAnchor(const YAML::Mark& m, const std::string& name) override {
    pending_name_ = name;
    pending_mark_ = m;
  }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t a) override {
    const Anchor& an = anchors_[a];
    for (const Open& o : open_)
      if (o.anchor == a)
        throw ConfigError(at(m) + ": alias *" + an.name + " refers to the collection that holds " +
                          "it (anchored &" + an.name + " at line " +
                          std::to_string(an.mark.line + 1) +
                          "): an alias cycle, which a config cannot have");
    reach(m, int(open_.size()) + an.depth, "*" + an.name);
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t a,
                       YAML::EmitterStyle::value) override {
    open(m, a);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t a,
                  YAML::EmitterStyle::value) override {
    open(m, a);
  }
  void OnMapEnd() override { close(); }

 private:
  /// An anchored node: its name, where, and the collection levels it holds (0 for a scalar).
  struct Anchor {
    std::string name;
    YAML::Mark mark;
    int depth = 0;
  };
  /// A collection being parsed: its anchor (0 = none) and the deepest level seen below it.
  struct Open {
    YAML::anchor_t anchor;
    int deepest;
  };

  std::string at(const YAML::Mark& m) const {
    return origin_ + (m.is_null() ? "" : " line " + std::to_string(m.line + 1));
  }
  void name_anchor(YAML::anchor_t a) {
    if (a == YAML::NullAnchor) return;
    anchors_[a] = Anchor{pending_name_, pending_mark_, 0};
  }
  /// A node `depth` collection levels deep (counting the root collection as 1) at `m`.
  void reach(const YAML::Mark& m, int depth, const std::string& via) {
    if (depth > kMaxConfigDepth)
      throw ConfigError(at(m) + ": nested deeper than " + std::to_string(kMaxConfigDepth) +
                        " levels" + (via.empty() ? "" : " (through the alias " + via + ")") +
                        "; a config is sections of `key: value` lines");
    for (Open& o : open_) o.deepest = std::max(o.deepest, depth);
  }
  void leaf(const YAML::Mark&, YAML::anchor_t a) { name_anchor(a); }
  void open(const YAML::Mark& m, YAML::anchor_t a) {
    name_anchor(a);
    open_.push_back(Open{a, 0});
    reach(m, int(open_.size()), "");
  }
  void close() {
    const Open o = open_.back();
    open_.pop_back();
    // the levels this collection holds, itself included, for the aliases that name it
    if (o.anchor != YAML::NullAnchor) anchors_[o.anchor].depth = o.deepest - int(open_.size());
  }

  const std::string& origin_;
  std::map<YAML::anchor_t, Anchor> anchors_;
  std::vector<Open> open_;
  std::string pending_name_;
  YAML::Mark pending_mark_ = YAML::Mark::null_mark();
};

/// Applies `node` (a map `depth` levels deep; the root is 1) under the dotted `prefix`.
void apply_node(Config& c, const YAML::Node& node, const std::string& prefix,
                const std::string& origin, SeenKeys& seen, int depth = 1) {
  if (node.IsNull()) return;
  // ConfigShapeCheck has refused deeper texts; this bounds the recursion on its own as well
  if (depth > kMaxConfigDepth)
    throw ConfigError(origin + ": " + prefix + ": nested deeper than " +
                      std::to_string(kMaxConfigDepth) + " levels");
  if (!node.IsMap()) {
    if (prefix.empty())
      throw ConfigError(origin + ": expected a map of sections (experiment:, data:, ...)");
    throw ConfigError(prefix + ": expected a scalar value (in " + origin + ")");
  }
  for (const auto& kv : node) {
    const std::string name = kv.first.Scalar();
    const std::string key = prefix.empty() ? name : prefix + "." + name;
    // a section (`training:`) given twice, or a key given twice in one section or once as
    // `training.lr:` and once under `training:`
    require_unique(seen, key, kv.first.Mark(), origin);
    const YAML::Node v = kv.second;
    if (v.IsMap()) {
      apply_node(c, v, key, origin, seen, depth + 1);
    } else if (v.IsScalar()) {
      set_value(c, key, v.Scalar(), origin);
    } else if (v.IsNull()) {
      if (!find_key(key)) unknown_key(key, origin);
      // `key:` with nothing means "empty" for strings; other types reject the empty text.
      set_value(c, key, "", origin);
    } else if (v.IsSequence() && find_key(key) && find_key(key)->is_list) {
      // a list key written as a YAML sequence (`files: [a.jsonl.gz, b.jsonl.gz]`)
      std::string joined;
      for (const auto& item : v) {
        if (!item.IsScalar())
          throw ConfigError(key + ": expected a list of scalars (in " + origin + ")");
        joined += (joined.empty() ? "" : ",") + item.Scalar();
      }
      set_value(c, key, joined, origin);
    } else {
      if (!find_key(key)) unknown_key(key, origin);
      throw ConfigError(key + ": expected a scalar value, got a list (in " + origin + ")");
    }
  }
}

std::string executable_dir() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  return p.parent_path().string();
}

}  // namespace

void set_config_value(Config& c, const std::string& key, const std::string& value) {
  set_value(c, key, value, "");
}

std::string get_config_value(const Config& c, const std::string& key) {
  const ConfigKey* k = find_key(key);
  if (!k) unknown_key(key, "");
  return k->get(c);
}

void apply_config_yaml(Config& c, const std::string& yaml_text, const std::string& origin) {
  // yaml-cpp scans a flow collection to its end before its first event (it may be a key), with
  // about 80 bytes of tokens per byte of text: the size bounds that time and memory
  if (yaml_text.size() > kMaxConfigBytes)
    throw ConfigError(origin + ": " + std::to_string(yaml_text.size()) +
                      " bytes; a config is at most " + std::to_string(kMaxConfigBytes) +
                      " bytes (1 MiB)");
  YAML::Node root;
  try {
    {  // aliases and depth, before yaml-cpp builds (possibly cyclic) nodes
      std::istringstream in(yaml_text);
      YAML::Parser parser(in);
      ConfigShapeCheck check(origin);
      while (parser.HandleNextDocument(check)) {
      }
    }
    // Every document is parsed: YAML::Load would stop at the first "---" or "...", and the
    // settings (or malformed text) after it would be ignored without a word.
    std::vector<YAML::Node> docs = YAML::LoadAll(yaml_text);
    if (docs.size() > 1)
      throw ConfigError(origin + ": holds " + std::to_string(docs.size()) +
                        " YAML documents (separated by ---): a config file is one document");
    if (!docs.empty()) root = docs[0];
  } catch (const YAML::Exception& e) {
    throw ConfigError(origin + ": malformed YAML: " + e.what());
  }
  SeenKeys seen;
  apply_node(c, root, "", origin, seen);
}

namespace {

/// What `t` is, in words, for the messages about a config path that is not a regular file.
const char* file_type_name(std::filesystem::file_type t) {
  switch (t) {
    case std::filesystem::file_type::directory:
      return "a directory";
    case std::filesystem::file_type::block:
      return "a block device";
    case std::filesystem::file_type::character:
      return "a character device";
    case std::filesystem::file_type::fifo:
      return "a pipe";
    case std::filesystem::file_type::socket:
      return "a socket";
    default:
      return "not a regular file";
  }
}

/// The text of a config that is a character device or a pipe (`--config /dev/null`,
/// `--config <(...)`), read once to its end; more than kMaxStreamConfig bytes (`/dev/zero`)
/// is refused rather than read forever.
std::string read_stream_config(const std::string& path, const char* what) {
  constexpr size_t kMaxStreamConfig = kMaxConfigBytes;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("config file " + path + ": " + what + " that cannot be opened");
  std::string text;
  char buf[4096];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, size_t(in.gcount()));
    if (text.size() > kMaxStreamConfig)
      throw ConfigError("config file " + path + ": " + what + " that gave more than 1 MiB; a " +
                        "config is a YAML file (an empty one, or /dev/null, is accepted)");
  }
  return text;
}

}  // namespace

void apply_config_file(Config& c, const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_type t = fs::status(path, ec).type();
  std::string text;
  if (t == fs::file_type::not_found) throw ConfigError("config file not found: " + path);
  if (t == fs::file_type::none)  // e.g. a folder on the way without search permission
    throw ConfigError("config file " + path + ": cannot be read (" + ec.message() + ")");
  if (t == fs::file_type::regular) {
    const uintmax_t size = fs::file_size(path, ec);
    if (!ec && size > kMaxConfigBytes)
      throw ConfigError("config file " + path + ": " + std::to_string(size) +
                        " bytes; a config is at most " + std::to_string(kMaxConfigBytes) +
                        " bytes (1 MiB)");
    try {
      text = lcm::read_file(path);
    } catch (const std::exception& e) {
      throw ConfigError(e.what());
    }
  } else if (t == fs::file_type::character || t == fs::file_type::fifo) {
    text = read_stream_config(path, file_type_name(t));  // /dev/null: an empty config
  } else {
    throw ConfigError("config file " + path + ": is " + file_type_name(t) + ", not a YAML file");
  }
  apply_config_yaml(c, text, path);
}

void apply_overrides(Config& c, const std::vector<std::string>& args) {
  // Each key once: a repeat would silently replace the first value ("last wins"), as a repeated
  // key of a YAML file would (require_unique).
  std::map<std::string, std::string> given;
  auto set_once = [&](const std::string& key, const std::string& value) {
    const auto [it, inserted] = given.emplace(key, value);
    if (!inserted)
      throw ConfigError("config key " + quote(key) + " given twice on the command line: " +
                        quote(it->second) + " and " + quote(value) + "; give each key once");
    set_value(c, key, value, "command line");
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto eq = a.find('=');
    if (eq != std::string::npos) {
      std::string key = a.substr(0, eq);
      if (key.rfind("--", 0) == 0) key = key.substr(2);
      set_once(key, a.substr(eq + 1));
      continue;
    }
    std::string key = a.rfind("--", 0) == 0 ? a.substr(2) : a;
    if (!find_key(key))  // neither a known key nor key=value
      throw ConfigError("unexpected argument " + quote(a) +
                        " (overrides are key=value or key value)" + did_you_mean(close_keys(key)));
    const std::string missing = key + ": missing value (use " + key + "=VALUE)";
    if (i + 1 >= args.size()) throw ConfigError(missing);
    // `key value`: a following `key2=...` token is the next override, not this key's value.
    const std::string& next = args[i + 1];
    auto next_eq = next.find('=');
    if (next_eq != std::string::npos) {
      std::string next_key = next.substr(0, next_eq);
      if (next_key.rfind("--", 0) == 0) next_key = next_key.substr(2);
      if (find_key(next_key)) throw ConfigError(missing);
    }
    set_once(key, args[++i]);
  }
}

std::string find_default_config() {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (const char* env = std::getenv("LCM_CONFIG")) {
    if (*env && fs::is_regular_file(env, ec)) return env;
    // set but unusable: say so rather than silently falling back to another file
    if (*env) throw ConfigError(std::string("LCM_CONFIG=") + env + ": no such file");
  }
  auto search_up = [&](fs::path dir) -> std::string {
    for (int up = 0; up < 5 && !dir.empty(); ++up) {
      fs::path cand = dir / "configs" / "default.yaml";
      if (fs::is_regular_file(cand, ec)) return cand.lexically_normal().string();
      if (dir == dir.parent_path()) break;
      dir = dir.parent_path();
    }
    return "";
  };
  std::string exe = executable_dir();
  if (!exe.empty()) {
    std::string f = search_up(exe);
    if (!f.empty()) return f;
  }
  return search_up(fs::current_path(ec));
}

std::string describe_config_keys(const Config& c, const std::vector<std::string>& keys) {
  std::ostringstream s;
  size_t w = 0;
  for (const std::string& key : keys) w = std::max(w, key.size());
  for (const std::string& key : keys) {
    const ConfigKey* k = find_key(key);
    if (!k) unknown_key(key, "");
    const std::string v = k->get(c);
    s << "  " << k->key << std::string(w - k->key.size(), ' ') << " = " << (v.empty() ? "\"\"" : v)
      << "\n      " << k->doc << " [" << k->type << "]\n";
  }
  return s.str();
}

std::string describe_config(const Config& c, bool with_docs) {
  std::ostringstream s;
  size_t w = 0;
  for (auto& k : config_keys()) w = std::max(w, k.key.size());
  for (auto& k : config_keys()) {
    std::string v = k.get(c);
    s << "  " << k.key << std::string(w - k.key.size(), ' ') << " = " << (v.empty() ? "\"\"" : v);
    if (with_docs) s << "\n      " << k.doc << " [" << k.type << "]";
    s << "\n";
  }
  return s.str();
}

}  // namespace lcm::config
