// The Python module `lcm` (docs/tools.md "Python module"): liblcm's C++ API (include/lcm/lcm.hpp)
// for Python, built with pybind11. Programs and schedules are dicts or JSON strings in the forms
// lcm-serve accepts; predictions are numpy float64 arrays; liblcm's errors are lcm.Error
// subclasses carrying its message and reason. Scoring runs without the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "lcm/lcm.hpp"

namespace py = pybind11;

namespace {

// ---- limits of one call, as lcm-serve's jsonl protocol bounds one request (docs/tools.md) ----
constexpr size_t kMaxSchedules = 4096;  // lcm-serve: too_many_schedules
constexpr int kMaxJsonDepth = 256;      // nesting of a dict/list given as a program or schedule

// ---- exceptions: lcm.Error and its subclasses, each instance with a `reason` attribute ----
PyObject* g_error = nullptr;            // lcm.Error
PyObject* g_config_error = nullptr;     // lcm.ConfigError
PyObject* g_schema_error = nullptr;     // lcm.SchemaError
PyObject* g_weights_error = nullptr;    // lcm.WeightsError
PyObject* g_data_error = nullptr;       // lcm.DataError
PyObject* g_too_large_error = nullptr;  // lcm.RequestTooLargeError

/// A Python-side error raised from C++: the class, liblcm's reason and the message.
struct PyLcmError {
  PyObject* type;
  std::string reason;
  std::string message;
};

/// The lcm.Error subclass of a liblcm reason.
PyObject* class_of(const std::string& reason) {
  if (reason == "config") return g_config_error;
  if (reason == "load") return g_weights_error;
  if (reason == "data") return g_data_error;
  if (reason == "request_too_large" || reason == "too_many_schedules") return g_too_large_error;
  if (reason == "bad_argument" || reason == "moved_from" || reason == "error") return g_error;
  return g_schema_error;  // the program or schedule: malformed_json, depth_gt_5, bad_tree, ...
}

/// Sets the Python error `type(message)` with attribute `reason`.
void set_error(PyObject* type, const std::string& reason, const std::string& message) {
  py::object cls = py::reinterpret_borrow<py::object>(type);
  py::object exc = cls(message);
  exc.attr("reason") = reason;
  PyErr_SetObject(type, exc.ptr());
}

[[noreturn]] void throw_schema(const std::string& reason, const std::string& message) {
  throw PyLcmError{g_schema_error, reason, message};
}

// ---- dict / list / str → JSON text (the forms lcm-serve reads) ----

/// Writes `o` (dict with str keys, list, tuple, str, int, float, bool, None) as JSON. A dict or
/// list nested deeper than kMaxJsonDepth, another type, a non-str key or a non-finite float is a
/// SchemaError naming `what` and the path.
void write_json(rapidjson::Writer<rapidjson::StringBuffer>& w, py::handle o,
                const std::string& what, int depth) {
  if (depth > kMaxJsonDepth)
    throw_schema("too_deep",
                 what + ": nested more than " + std::to_string(kMaxJsonDepth) + " levels");
  PyObject* p = o.ptr();
  if (p == Py_None) {
    w.Null();
  } else if (PyBool_Check(p)) {
    w.Bool(p == Py_True);
  } else if (PyLong_Check(p)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(p, &overflow);
    if (overflow == 0) {
      w.Int64(v);
    } else {
      const std::string text = py::str(o);
      w.RawValue(text.c_str(), text.size(), rapidjson::kNumberType);
    }
  } else if (PyFloat_Check(p)) {
    const double v = PyFloat_AS_DOUBLE(p);
    if (!std::isfinite(v))
      throw_schema("bad_field", what + ": a non-finite number (" + std::string(py::str(o)) +
                                    ") has no JSON form");
    w.Double(v);
  } else if (PyUnicode_Check(p)) {
    Py_ssize_t n = 0;
    const char* s = PyUnicode_AsUTF8AndSize(p, &n);
    if (!s) throw py::error_already_set();
    w.String(s, rapidjson::SizeType(n));
  } else if (PyDict_Check(p)) {
    w.StartObject();
    PyObject *k = nullptr, *v = nullptr;
    Py_ssize_t pos = 0;
    while (PyDict_Next(p, &pos, &k, &v)) {
      if (!PyUnicode_Check(k))
        throw_schema("bad_field", what + ": a key of type " + std::string(Py_TYPE(k)->tp_name) +
                                      " (JSON keys are strings)");
      Py_ssize_t n = 0;
      const char* s = PyUnicode_AsUTF8AndSize(k, &n);
      if (!s) throw py::error_already_set();
      w.Key(s, rapidjson::SizeType(n));
      write_json(w, v, what, depth + 1);
    }
    w.EndObject();
  } else if (PyList_Check(p) || PyTuple_Check(p)) {
    w.StartArray();
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(p);
    PyObject** items = PySequence_Fast_ITEMS(p);
    for (Py_ssize_t i = 0; i < n; ++i) write_json(w, items[i], what, depth + 1);
    w.EndArray();
  } else if (PyObject_HasAttrString(p, "tolist") && PyObject_HasAttrString(p, "ndim")) {
    // a numpy array or scalar: its Python value (nested lists of int / float / bool)
    const py::object v =
        py::reinterpret_steal<py::object>(PyObject_CallMethod(p, "tolist", nullptr));
    if (!v) throw py::error_already_set();
    if (v.ptr() == p)
      throw_schema("bad_field", what + ": a value of type " + std::string(Py_TYPE(p)->tp_name) +
                                    " has no JSON form");
    write_json(w, v, what, depth + 1);
  } else if (PyIndex_Check(p)) {  // an integer of another type
    const py::object v = py::reinterpret_steal<py::object>(PyNumber_Index(p));
    if (!v) {  // its __index__ failed: the value has no integer to write
      PyErr_Clear();
      throw_schema("bad_field", what + ": a value of type " + std::string(Py_TYPE(p)->tp_name) +
                                    " that is not an integer has no JSON form");
    }
    write_json(w, v, what, depth);
  } else if (Py_TYPE(p)->tp_as_number && Py_TYPE(p)->tp_as_number->nb_float) {  // numpy.float32
    const double v = PyFloat_AsDouble(p);
    if (v == -1.0 && PyErr_Occurred()) throw py::error_already_set();
    write_json(w, py::float_(v), what, depth);
  } else {
    throw_schema("bad_field", what + ": a value of type " + std::string(Py_TYPE(p)->tp_name) +
                                  " has no JSON form");
  }
}

/// The JSON text of a program or schedule argument: a str (or bytes) as it is, a dict written
/// as JSON. Another type (a list where a dict is expected, a number) is a SchemaError with reason
/// "bad_argument"; a text longer than `max_bytes` a RequestTooLargeError (lcm-serve's
/// --max-line-mib).
std::string json_arg(py::handle o, const char* name, long index, size_t max_bytes) {
  PyObject* p = o.ptr();
  // the argument's name for messages ("schedules[3]"), built only when one is written
  const auto what_of = [name, index] {
    return index < 0 ? std::string(name) : std::string(name) + "[" + std::to_string(index) + "]";
  };
  std::string text;
  if (PyUnicode_Check(p)) {
    Py_ssize_t n = 0;
    const char* s = PyUnicode_AsUTF8AndSize(p, &n);
    if (!s) throw py::error_already_set();
    if (size_t(n) > max_bytes)
      throw PyLcmError{g_too_large_error, "request_too_large",
                       what_of() + ": " + std::to_string(n) + " bytes of JSON > the bound of " +
                           std::to_string(max_bytes) + " bytes (Model(max_json_mib=...))"};
    text.assign(s, size_t(n));
  } else if (PyBytes_Check(p)) {
    const size_t n = size_t(PyBytes_GET_SIZE(p));
    if (n > max_bytes)
      throw PyLcmError{g_too_large_error, "request_too_large",
                       what_of() + ": " + std::to_string(n) + " bytes of JSON > the bound of " +
                           std::to_string(max_bytes) + " bytes (Model(max_json_mib=...))"};
    text.assign(PyBytes_AS_STRING(p), n);
  } else if (PyDict_Check(p)) {
    rapidjson::StringBuffer sb;
    rapidjson::Writer<rapidjson::StringBuffer> w(sb);
    write_json(w, o, what_of(), 0);
    if (sb.GetSize() > max_bytes)
      throw PyLcmError{g_too_large_error, "request_too_large",
                       what_of() + ": " + std::to_string(sb.GetSize()) +
                           " bytes of JSON > the bound of " + std::to_string(max_bytes) +
                           " bytes (Model(max_json_mib=...))"};
    text.assign(sb.GetString(), sb.GetSize());
  } else {
    throw_schema("bad_argument", what_of() + ": expected a dict or a JSON string, got " +
                                     std::string(Py_TYPE(p)->tp_name));
  }
  return text;
}

// ---- lcm.Model ----

/// A loaded checkpoint (lcm::Predictor) and the bounds of one call.
class Model {
 public:
  Model(const std::string& weights_path, const std::string& device, int threads,
        const py::object& config, const std::vector<std::string>& overrides, size_t cache_programs,
        size_t max_request_memory, size_t max_json_mib, bool calibrated,
        const std::string& learning, size_t memo_kib, const std::string& weights)
      : max_json_bytes_(max_json_mib << 20) {
    if (threads < 1) throw PyLcmError{g_config_error, "config", "threads: must be ≥ 1"};
    if (max_json_mib < 1 || max_json_mib > 4096)
      throw PyLcmError{g_config_error, "config", "max_json_mib: must be in [1, 4096]"};
    lcm::PredictorOptions o;
    o.weights_path = weights_path;
    if (!config.is_none()) o.config_file = py::str(config);
    o.overrides.push_back("training.device=" + device);
    o.overrides.push_back("training.threads=" + std::to_string(threads));
    if (!calibrated) o.overrides.push_back("eval.calibrated=false");
    o.overrides.insert(o.overrides.end(), overrides.begin(), overrides.end());
    o.cache_programs = cache_programs;
    o.max_request_memory_mib = max_request_memory;
    o.learning = learning;
    o.memo_kib = memo_kib;
    o.weights = weights;
    {
      py::gil_scoped_release nogil;
      p_ = std::make_unique<lcm::Predictor>(o);
    }
    info_ = py::module_::import("json").attr("loads")(p_->info_json());
  }

  /// Scores `schedules` of `program`: (speedups, errors) with NaN for a schedule that could not
  /// be scored and errors [(index, reason, detail)].
  std::pair<py::array_t<double>, py::list> score(py::handle program, py::handle schedules,
                                                 py::handle untransformed) const {
    const std::string prog = json_arg(program, "program", -1, max_json_bytes_);
    const std::string untr = untransformed.is_none()
                                 ? std::string()
                                 : json_arg(untransformed, "untransformed", -1, max_json_bytes_);
    std::vector<std::string> sched;
    if (PyUnicode_Check(schedules.ptr()) || PyBytes_Check(schedules.ptr()) ||
        PyDict_Check(schedules.ptr()) || !PySequence_Check(schedules.ptr()))
      throw_schema("bad_argument",
                   "schedules: expected a list of schedules (dicts or JSON "
                   "strings), got " +
                       std::string(Py_TYPE(schedules.ptr())->tp_name));
    const py::object items = py::reinterpret_steal<py::object>(
        PySequence_Fast(schedules.ptr(), "schedules: expected a sequence"));
    if (!items) throw py::error_already_set();
    const size_t n = size_t(PySequence_Fast_GET_SIZE(items.ptr()));
    if (n > kMaxSchedules)
      throw PyLcmError{g_too_large_error, "too_many_schedules",
                       "schedules: " + std::to_string(n) + " schedules in one call > " +
                           std::to_string(kMaxSchedules) +
                           " (lcm-serve's bound of one request): split them"};
    sched.reserve(n);
    size_t total = prog.size() + untr.size();
    for (size_t i = 0; i < n; ++i) {
      sched.push_back(json_arg(PySequence_Fast_GET_ITEM(items.ptr(), i), "schedules", long(i),
                               max_json_bytes_));
      total += sched.back().size();
      if (total > max_json_bytes_)
        throw PyLcmError{g_too_large_error, "request_too_large",
                         "program and schedules: more than " + std::to_string(max_json_bytes_) +
                             " bytes of JSON in one call (Model(max_json_mib=...))"};
    }
    std::vector<lcm::Score> s;
    {
      py::gil_scoped_release nogil;
      s = p_->score(prog, sched, untr);
    }
    py::array_t<double> out{py::ssize_t(s.size())};
    double* v = out.mutable_data();
    py::list errors;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i].ok()) {
        v[i] = s[i].speedup;
      } else {
        v[i] = std::numeric_limits<double>::quiet_NaN();
        errors.append(py::make_tuple(i, s[i].reason, s[i].detail));
      }
    }
    return {std::move(out), std::move(errors)};
  }

  py::object predict(py::handle program, py::handle schedules, py::handle untransformed,
                     const std::string& errors) const {
    if (errors != "raise" && errors != "return")
      throw PyLcmError{g_error, "bad_argument",
                       "errors: expected \"raise\" or \"return\", got \"" + errors + "\""};
    auto [speedups, errs] = score(program, schedules, untransformed);
    if (errors == "return") return py::make_tuple(speedups, errs);
    if (!errs.empty()) {
      const py::tuple first = errs[0];
      const std::string reason = py::str(first[1]);
      throw PyLcmError{class_of(reason), reason,
                       "schedule " + std::string(py::str(first[0])) + ": " + reason + ": " +
                           std::string(py::str(first[2])) +
                           (errs.size() > 1 ? " (and " + std::to_string(errs.size() - 1) +
                                                  " more schedules; errors=\"return\" lists them)"
                                            : "")};
    }
    return std::move(speedups);
  }

  py::array_t<int64_t> rank(py::handle program, py::handle schedules, py::handle untransformed,
                            const std::string& errors) const {
    py::object r = predict(program, schedules, untransformed, errors);
    py::array_t<double> v =
        errors == "return" ? py::array_t<double>(py::tuple(r)[0]) : py::array_t<double>(r);
    const double* x = v.data();
    const size_t n = size_t(v.size());
    std::vector<int64_t> idx(n);
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [x](int64_t a, int64_t b) {
      if (std::isnan(x[a]) || std::isnan(x[b])) return !std::isnan(x[a]) && std::isnan(x[b]);
      return x[a] > x[b];
    });
    py::array_t<int64_t> out{py::ssize_t(n)};
    std::copy(idx.begin(), idx.end(), out.mutable_data());
    return out;
  }

  /// Learning during search (lcm::Predictor::observe) as a dict.
  py::dict observe(py::handle program, py::handle schedule, py::handle execution_times,
                   py::handle untransformed, py::handle untransformed_time) {
    const std::string prog = json_arg(program, "program", -1, max_json_bytes_);
    const std::string sched = json_arg(schedule, "schedule", -1, max_json_bytes_);
    const std::string untr = untransformed.is_none()
                                 ? std::string()
                                 : json_arg(untransformed, "untransformed", -1, max_json_bytes_);
    std::vector<double> times;
    try {
      times = py::cast<std::vector<double>>(execution_times);
    } catch (const std::exception&) {
      throw PyLcmError{g_error, "bad_execution_times",
                       "execution_times: expected a sequence of numbers (ms)"};
    }
    double initial = std::numeric_limits<double>::quiet_NaN();
    if (!untransformed_time.is_none()) {
      try {
        initial = py::cast<double>(untransformed_time);
      } catch (const std::exception&) {
        throw PyLcmError{g_error, "bad_untransformed_time",
                         "untransformed_time: expected a number (ms) or None"};
      }
      if (std::isnan(initial))
        throw PyLcmError{g_error, "bad_untransformed_time", "untransformed_time: NaN"};
    }
    lcm::Observed o;
    try {
      py::gil_scoped_release nogil;
      o = p_->observe(prog, sched, times, untr, initial);
    } catch (const lcm::Error& e) {
      throw PyLcmError{learning_class(e.reason()), e.reason(), e.what()};
    }
    py::dict d;
    d["measured_speedup"] = o.measured_speedup;
    d["predicted_speedup"] = o.predicted_speedup;
    d["corrected_speedup"] = o.corrected_speedup;
    d["offset"] = o.offset;
    d["scale"] = o.scale;
    d["observations"] = o.observations;
    d["untransformed"] = o.untransformed;
    return d;
  }

  void wait_for_learning() {
    py::gil_scoped_release nogil;
    p_->wait_for_learning();
  }

  bool reset(py::handle program) {
    if (program.is_none()) {
      p_->reset_observations();
      return true;
    }
    return p_->reset_observations(json_arg(program, "program", -1, max_json_bytes_));
  }

  void save_adaptation(const std::string& path) const {
    try {
      py::gil_scoped_release nogil;
      p_->save_adaptation(path);
    } catch (const lcm::Error& e) {
      throw PyLcmError{g_error, e.reason(), e.what()};
    }
  }

  void load_adaptation(const std::string& path) {
    try {
      py::gil_scoped_release nogil;
      p_->load_adaptation(path);
    } catch (const lcm::Error& e) {
      throw PyLcmError{g_error, e.reason(), e.what()};
    }
  }

  const py::object& info() const { return info_; }

 private:
  /// The class of an observe() error: lcm.Error for the times, class_of's otherwise.
  static PyObject* learning_class(const std::string& reason) {
    if (reason == "bad_execution_times" || reason == "bad_untransformed_time" ||
        reason == "no_untransformed_time")
      return g_error;
    return class_of(reason);
  }

  std::unique_ptr<lcm::Predictor> p_;
  size_t max_json_bytes_;
  py::object info_;
};

// ---- lcm.read_looperset ----

/// An iterator over the programs of a file (lcm::ProgramFile).
class LooperSetReader {
 public:
  explicit LooperSetReader(const std::string& path) {
    py::gil_scoped_release nogil;
    f_ = std::make_unique<lcm::ProgramFile>(path);
  }
  py::dict next() {
    lcm::ProgramRecord r;
    bool more = false;
    {
      py::gil_scoped_release nogil;
      std::lock_guard<std::mutex> lock(mu_);  // one reader, possibly several Python threads
      more = f_->next(r);
    }
    if (!more) throw py::stop_iteration();
    py::dict d;
    d["name"] = r.name;
    d["file"] = r.file;
    d["line"] = r.line;
    d["program"] = r.program_json;
    d["untransformed"] = r.untransformed_json;
    d["schedules"] = r.schedule_jsons;
    py::array_t<double> m(py::ssize_t(r.measured_speedups.size()));
    std::copy(r.measured_speedups.begin(), r.measured_speedups.end(), m.mutable_data());
    d["measured_speedups"] = m;
    d["schedule_problems"] = r.schedule_problems;
    return d;
  }
  py::list skips() const {
    py::list out;
    std::vector<lcm::Skip> skips;
    {
      py::gil_scoped_release nogil;
      std::lock_guard<std::mutex> lock(mu_);
      skips = f_->skips();
    }
    for (const lcm::Skip& s : skips) {
      py::dict d;
      d["level"] = s.level;
      d["reason"] = s.reason;
      d["file"] = s.file;
      d["line"] = s.line;
      d["program"] = s.program;
      d["schedule"] = s.schedule;
      d["detail"] = s.detail;
      out.append(d);
    }
    return out;
  }
  py::dict skip_counts() const {
    std::vector<std::pair<std::string, std::int64_t>> counts;
    {
      py::gil_scoped_release nogil;
      std::lock_guard<std::mutex> lock(mu_);
      counts = f_->skip_counts();
    }
    py::dict d;
    for (const auto& [k, v] : counts) d[py::str(k)] = v;
    return d;
  }

 private:
  std::unique_ptr<lcm::ProgramFile> f_;
  mutable std::mutex mu_;
};

// ---- lcm.metrics ----

/// The values of `o`, a 1-D sequence of numbers. Each must be finite, and > 0 when `speedups`
/// (a measured or predicted speedup, ×): otherwise an Error with reason "bad_argument" naming
/// the first bad index, so that no metric is computed from a NaN or a non-positive speedup.
std::vector<double> doubles(py::handle o, const char* what, bool speedups) {
  std::vector<double> v;
  try {
    py::array_t<double, py::array::c_style | py::array::forcecast> a =
        py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(o);
    if (!a || a.ndim() != 1) throw std::invalid_argument("");
    v.assign(a.data(), a.data() + a.size());
  } catch (const std::exception&) {
    PyErr_Clear();
    throw PyLcmError{g_error, "bad_argument",
                     std::string(what) + ": expected a 1-D sequence of numbers"};
  }
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]) || (speedups && v[i] <= 0))
      throw PyLcmError{
          g_error, "bad_argument",
          std::string(what) + "[" + std::to_string(i) +
              "] = " + py::str(py::float_(v[i])).cast<std::string>() +
              (speedups ? ": a speedup is a finite number > 0" : ": expected a finite number")};
  return v;
}

py::dict program_dict(const lcm::ProgramMetrics& p) {
  py::dict d;
  d["program"] = p.program;
  d["n_schedules"] = p.n_schedules;
  d["mape"] = p.mape;
  d["spearman"] = p.spearman;
  d["ndcg"] = p.ndcg;
  d["ndcg_5"] = p.ndcg_5;
  d["ndcg_1"] = p.ndcg_1;
  d["top1_recovered"] = p.top1_recovered;
  d["top5_recovered"] = p.top5_recovered;
  return d;
}

lcm::MetricsSummary summary_of(py::handle measured, py::handle predicted, py::handle programs,
                               py::handle rank) {
  const std::vector<double> y = doubles(measured, "measured", true);
  const std::vector<double> p = doubles(predicted, "predicted", true);
  const std::vector<double> r =
      rank.is_none() ? std::vector<double>() : doubles(rank, "rank", false);
  std::vector<std::string> names;
  if (programs.is_none()) {
    names.assign(y.size(), "");
  } else {
    try {
      names = programs.cast<std::vector<std::string>>();
    } catch (const py::cast_error&) {
      throw PyLcmError{g_error, "bad_argument", "programs: expected a sequence of str"};
    }
  }
  py::gil_scoped_release nogil;
  return lcm::compute_metrics(names, y, p, r);
}

py::dict metrics(py::handle measured, py::handle predicted, py::handle programs, py::handle rank) {
  const lcm::MetricsSummary m = summary_of(measured, predicted, programs, rank);
  if (programs.is_none()) return program_dict(m.programs.at(0));
  py::dict d;
  py::list progs;
  for (const lcm::ProgramMetrics& p : m.programs) progs.append(program_dict(p));
  d["programs"] = progs;
  d["n_datapoints"] = m.n_datapoints;
  d["mean_mape"] = m.mean_mape;
  d["mean_spearman"] = m.mean_spearman;
  d["mean_ndcg"] = m.mean_ndcg;
  d["mean_ndcg_5"] = m.mean_ndcg_5;
  d["mean_ndcg_1"] = m.mean_ndcg_1;
  d["mean_top1_recovered"] = m.mean_top1_recovered;
  d["mean_top5_recovered"] = m.mean_top5_recovered;
  d["n_spearman"] = m.n_spearman;
  d["n_ndcg"] = m.n_ndcg;
  d["weighted_mape"] = m.weighted_mape;
  d["median_error_factor"] = m.median_error_factor;
  d["within_2x"] = m.within_2x;
  return d;
}

PyObject* new_class(py::module_& m, const char* name, PyObject* base, const char* doc) {
  const std::string full = std::string("lcm.") + name;
  PyObject* c = PyErr_NewExceptionWithDoc(full.c_str(), doc, base, nullptr);
  if (!c) throw py::error_already_set();
  m.add_object(name, py::handle(c));
  return c;
}

}  // namespace

PYBIND11_MODULE(lcm, m) {
  m.doc() =
      "lcm: the LOOPer learned cost model in-process (liblcm). Load a checkpoint with "
      "lcm.Model, then predict the speedups of candidate schedules of a program. See "
      "docs/tools.md \"Python module\".";
  m.attr("__version__") = lcm::library_version();
  m.attr("MAX_SCHEDULES") = kMaxSchedules;

  g_error = new_class(m, "Error", PyExc_RuntimeError,
                      "Base class of lcm's errors. `reason` is liblcm's short name for the "
                      "problem (\"config\", \"load\", \"malformed_json\", \"depth_gt_5\", ...); "
                      "str(e) is its message.");
  g_config_error = new_class(m, "ConfigError", g_error,
                             "A bad option, override or config file (reason \"config\").");
  g_weights_error = new_class(m, "WeightsError", g_error,
                              "A checkpoint that cannot be loaded: missing, unreadable, corrupt, "
                              "not a cost model, non-finite weights (reason \"load\").");
  g_schema_error = new_class(m, "SchemaError", g_error,
                             "A program or schedule that cannot be read or scored (malformed "
                             "JSON, a wrong type, a program the feature rules reject, a "
                             "schedule that cannot be applied); `reason` names it.");
  g_data_error =
      new_class(m, "DataError", g_error, "A data file that cannot be read (reason \"data\").");
  g_too_large_error =
      new_class(m, "RequestTooLargeError", g_error,
                "A call past a bound: more than MAX_SCHEDULES schedules (\"too_many_schedules\"), "
                "more JSON than max_json_mib, or more memory than max_request_memory "
                "(\"request_too_large\").");

  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (const PyLcmError& e) {
      set_error(e.type, e.reason, e.message);
    } catch (const lcm::Error& e) {
      set_error(class_of(e.reason()), e.reason(), e.what());
    }
  });

  py::class_<Model>(m, "Model", R"doc(
A cost-model checkpoint (.safetensors, written by lcm-train) loaded once.

Model(weights_path, *, device="cpu", threads=1, config=None, overrides=(), cache_programs=64,
      max_request_memory=1024, max_json_mib=64, calibrated=True, learning="correction",
      memo_kib=2048, weights="fp32")

- device: "cpu" or "cuda:N" (training.device); threads: engine threads (training.threads).
- config: an optional YAML config file (the tools' --config); overrides: "key=value" settings.
- cache_programs: programs kept featurized (least recently used dropped).
- max_request_memory: MiB the model, the program cache and the calls being scored may use
  (lcm-serve --max-request-memory; at least 128).
- max_json_mib: the most JSON text one call may carry (lcm-serve --max-line-mib).
- calibrated: apply the checkpoint's calibration map (eval.calibrated).
- learning: what observe() learns, "VARIANT[,key=value...]": "none", "correction" (default),
  "finetune" or "both"; fine-tuning keys steps, lr, anchor, head_only, buffer, programs,
  synchronous (docs/tools.md "Learning during search").
- memo_kib: KiB of memoised sub-results kept per cached program (lcm-serve --memo-kib; 0: off).
  A one-schedule call reuses what earlier calls computed, with the same answers bit for bit
  (docs/tools.md "Memoised sub-results").
- weights: "fp32" (the checkpoint's values) or "bf16" (lcm-serve --weights bf16: the weight
  matrices rounded to BF16, read as 2-byte copies by one-schedule calls, sums in FP32; answers
  within BF16 rounding of fp32's; CPU only).

Raises WeightsError (missing, corrupt or wrong kind of file) or ConfigError. Thread-safe: any
number of Python threads may call one Model at once; scoring runs without the GIL.
)doc")
      .def(py::init<const std::string&, const std::string&, int, const py::object&,
                    const std::vector<std::string>&, size_t, size_t, size_t, bool,
                    const std::string&, size_t, const std::string&>(),
           py::arg("weights_path"), py::kw_only(), py::arg("device") = "cpu",
           py::arg("threads") = 1, py::arg("config") = py::none(),
           py::arg("overrides") = std::vector<std::string>{}, py::arg("cache_programs") = 64,
           py::arg("max_request_memory") = 1024, py::arg("max_json_mib") = 64,
           py::arg("calibrated") = true, py::arg("learning") = "correction",
           py::arg("memo_kib") = 2048, py::arg("weights") = "fp32")
      .def_property_readonly("info", &Model::info, R"doc(
dict: library_version, weights_path, device, threads, weights ("fp32" or "bf16"), ensemble_size,
parameters (one member's
weights), model (sizes: lcm.model_config), preset, input_scaling, calibration (the applied map,
or None), training_data (train_file, valid_file, experiment, run_id, epoch, val_mape, loss,
select_metric, selection; None where the checkpoint does not record it).
)doc")
      .def("predict", &Model::predict, py::arg("program"), py::arg("schedules"), py::kw_only(),
           py::arg("untransformed") = py::none(), py::arg("errors") = "raise", R"doc(
Predicted speedups (x over the untransformed program) of `schedules` of `program`.

program: the program annotation (dict or JSON string: function_name, iterators, computations,
  buffers, ...), as lcm-serve's line 1 / jsonl "program".
schedules: a list of N schedules (dicts or JSON strings: comp00: {tiling, unrolling_factor,
  parallelized_dim, shiftings, transformations_list}, fusions, tree_structure, sched_str, ...,
  every dialect lcm-serve reads); at most MAX_SCHEDULES (4096).
untransformed: the program's untransformed schedule, whose tree_structure is the loop tree
  (None: the iterators' parent/child links).
errors: "raise" (default): a schedule that cannot be scored raises SchemaError naming its index
  and reason; "return": returns (speedups, errors) with NaN for such a schedule and errors a list
  of (index, reason, detail).

Returns numpy.ndarray[float64] of shape (N,), all schedules scored in one batched forward.
Raises SchemaError when the program cannot be scored (malformed JSON, depth_gt_5, bad_tree,
a list where a dict is expected, ...), RequestTooLargeError past a bound.
)doc")
      .def("rank", &Model::rank, py::arg("program"), py::arg("schedules"), py::kw_only(),
           py::arg("untransformed") = py::none(), py::arg("errors") = "raise", R"doc(
The schedules' indices, best predicted speedup first (numpy.ndarray[int64], shape (N,); ties
keep the given order; with errors="return" unscoreable schedules come last). Raises as predict.
)doc")
      .def("observe", &Model::observe, py::arg("program"), py::arg("schedule"),
           py::arg("execution_times"), py::kw_only(), py::arg("untransformed") = py::none(),
           py::arg("untransformed_time") = py::none(), R"doc(
Learning during search: `schedule` of `program` ran in `execution_times` (ms, each > 0).

Its measured speedup is untransformed_time / min(execution_times) (floored at 0.01, as the
training labels); untransformed_time (ms) defaults to the time of an earlier observe() of the
program's untransformed schedule. The program's correction ln s' = offset + scale * ln s is
refitted (least squares shrunk toward offset 0, scale 1; scale > 0) and applied to every later
predict()/rank() of this program (the same program text), never to another program's.

Returns a dict: measured_speedup, predicted_speedup (the model's own answer), corrected_speedup
(after this observation), offset, scale, observations, untransformed (bool). Raises lcm.Error
(reason bad_execution_times, bad_untransformed_time, no_untransformed_time) or SchemaError (a
schedule that cannot be applied to the program, a program that cannot be scored).
)doc")
      .def("wait_for_learning", &Model::wait_for_learning, R"doc(
Blocks until the fine-tuning steps of every observe() so far have run (learning "finetune" or
"both" without synchronous=1; otherwise returns at once). Afterwards predictions are those of a
synchronous Model: reproducible.
)doc")
      .def("reset", &Model::reset, py::arg("program") = py::none(), R"doc(
Forgets what observe() learned of `program` (None: of every program); its predictions are the
model's own again, bit for bit. Returns whether there was something to forget.
)doc")
      .def("save_adaptation", &Model::save_adaptation, py::arg("path"), R"doc(
Writes the learned state (every program's observations) to `path` atomically, as a versioned
JSON file (docs/tools.md "Learning during search"). Raises lcm.Error (reason "io").
)doc")
      .def("load_adaptation", &Model::load_adaptation, py::arg("path"), R"doc(
Replaces the learned state with the file `path` (save_adaptation's). Raises lcm.Error (reason
"bad_adaptation": unreadable, not such a file, or learned with another checkpoint).
)doc");

  py::class_<LooperSetReader>(m, "LooperSetReader", R"doc(
Iterator over the program records of a LOOPerSet (JSON Lines) or legacy Tiramisu file, plain or
gzip, read by lcm's own reader (lcm-prepare's and lcm-predict's). Each record is a dict: name,
file, line, program (JSON text of the program annotation with function_name), untransformed
(JSON text of schedules_list[0]), schedules (list of JSON texts, execution_times removed),
measured_speedups (numpy float64 (N,): initial time / min time, floored at 0.01; NaN when
unmeasured or malformed), schedule_problems (the reader's reason per schedule, "" when none).
Records the reader rejects are skipped; `skips` lists them (level, reason, file, line, program,
schedule, detail; the first 1000) and `skip_counts` counts them by "level/reason".
)doc")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", &LooperSetReader::next)
      .def_property_readonly("skips", &LooperSetReader::skips)
      .def_property_readonly("skip_counts", &LooperSetReader::skip_counts);

  m.def(
      "read_looperset",
      [](const std::string& path) { return std::make_unique<LooperSetReader>(path); },
      py::arg("path"), R"doc(
An iterator (LooperSetReader) over the programs of the file at `path`. Raises DataError when the
file cannot be opened or read (missing, a directory, xz/zstd/... compressed).
)doc");

  m.def(
      "metrics",
      [](py::handle measured, py::handle predicted, py::handle programs, py::handle rank) {
        return metrics(measured, predicted, programs, rank);
      },
      py::arg("measured"), py::arg("predicted"), py::kw_only(), py::arg("programs") = py::none(),
      py::arg("rank") = py::none(), R"doc(
lcm-eval's metrics (the same code; docs/model-spec.md §7), values rounded to 6 decimals first.

measured, predicted: speedups (x) of N schedules. Without `programs` they are one program's and
the result is its dict: program, n_schedules, mape (%), spearman, ndcg, ndcg_5, ndcg_1,
top1_recovered, top5_recovered (NaN where undefined, e.g. fewer than 2 schedules). With
`programs` (N names) the datapoints are grouped by program and the result is lcm-eval's summary:
programs (a list of those dicts), n_datapoints, mean_* (unweighted means over programs, NaN
skipped), n_spearman, n_ndcg, weighted_mape, median_error_factor, within_2x.
rank: what orders the schedules for the ranking metrics (default: predicted; lcm-eval ranks by
the uncalibrated predictions). Raises Error (reason "bad_argument") for different sizes, N = 0, a
NaN or infinite value, or a measured or predicted speedup <= 0.
)doc");

  m.def(
      "eval_table",
      [](py::handle measured, py::handle predicted, py::handle programs, py::handle rank,
         bool per_program) {
        const lcm::MetricsSummary s = summary_of(measured, predicted, programs, rank);
        return lcm::metrics_table(s, per_program);
      },
      py::arg("measured"), py::arg("predicted"), py::kw_only(), py::arg("programs"),
      py::arg("rank") = py::none(), py::arg("per_program") = false, R"doc(
lcm-eval's table (text, as it prints it) of the metrics of metrics(measured, predicted,
programs=..., rank=...); per_program adds the rows of lcm-eval --per-program.
)doc");
}
