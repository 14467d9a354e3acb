"""The Python module lcm (python/lcm_module.cpp over liblcm): predictions equal lcm-predict's,
every error path is an lcm.Error subclass with the product's message and nothing on stderr,
several threads give one thread's answers, memory stays flat over many calls, and the module
installs and imports from outside the build tree."""
import copy
import json
import math
import os
import re
import resource
import subprocess
import sys
import threading

import numpy as np
import pytest

import lcm
from conftest import BIN_DIR, SOURCE_DIR, SYNTH_VALID, run_tool


def records(path):
    return list(lcm.read_looperset(path))


@pytest.fixture(scope="module")
def model(checkpoint):
    return lcm.Model(checkpoint)


@pytest.fixture(scope="module")
def progs(programs_file):
    return records(programs_file)


# ---- predictions ----

def predict_file(checkpoint, programs_file, workdir, name, calibrated):
    """lcm-predict's answers for every schedule of the file: {(program, schedule index): speedup}."""
    out = os.path.join(workdir, name)
    run_tool("lcm-predict", ["eval.weights_path=" + checkpoint, "eval.input_file=" + programs_file,
                             "training.threads=1", "eval.calibrated=" + str(calibrated).lower(),
                             "--out", out], workdir)
    expected = {}
    with open(out) as f:
        for line in f:
            row = json.loads(line)
            expected[(row["program"], row["schedule_index"])] = row["predicted_speedup"]
    return expected


def steepest_slope(cal, s0, s1):
    """The largest slope d ln(speedup) / d score of the calibration map `cal` (Model.info's
    "calibration": knots x, log_speedup, tail_slope) over the scores between s0 and s1."""
    x, y = cal["x"], cal["log_speedup"]
    lo, hi = min(s0, s1), max(s0, s1)
    slope = cal["tail_slope"] if lo < x[0] or hi > x[-1] else 0.0
    for k in range(len(x) - 1):
        if x[k + 1] >= lo and x[k] <= hi:
            slope = max(slope, (y[k + 1] - y[k]) / (x[k + 1] - x[k]))
    return slope


def test_predictions_equal_lcm_predict(model, checkpoint, programs_file, progs, workdir):
    """Every schedule of the mini sample (or the synthetic slice): Model.predict = lcm-predict.

    The model's own answers (uncalibrated) agree up to the float rounding of the batch products
    (the module scores one program's schedules per forward, lcm-predict mixes programs in its
    batches, and a GEMM kernel may sum a product of other rows in another order). The calibrated
    answers are the map applied to those: they agree within what the map's steepest segment
    between the two scores makes of that rounding (its segments between close knots can be steep,
    so a 1e-7 difference of scores may move a calibrated speedup by percents)."""
    raw_model = lcm.Model(checkpoint, calibrated=False)
    raw_want = predict_file(checkpoint, programs_file, workdir, "pred_raw.jsonl", False)
    expected = predict_file(checkpoint, programs_file, workdir, "pred.jsonl", True)
    cal = model.info["calibration"]
    assert cal is not None and cal["kind"] != "none"
    log_output = model.info["model"]["output"] == "log_speedup"
    worst, worst_cal, compared, dropped, amplified = 0.0, 0.0, 0, 0, 0
    for rec in progs:
        got, errors = model.predict(rec["program"], rec["schedules"],
                                    untransformed=rec["untransformed"], errors="return")
        raw, raw_errors = raw_model.predict(rec["program"], rec["schedules"],
                                            untransformed=rec["untransformed"], errors="return")
        assert got.dtype == np.float64 and got.shape == (len(rec["schedules"]),)
        failed = {i for i, _, _ in errors}
        assert failed == {i for i, _, _ in raw_errors}
        for i, v in enumerate(got):
            want = expected.get((rec["name"], i))
            if want is None:  # lcm-predict dropped it: the module must not score it either
                assert i in failed and math.isnan(v), (rec["name"], i, v)
                assert (rec["name"], i) not in raw_want
                dropped += 1
                continue
            assert i not in failed, (rec["name"], i, errors)
            r, rw = raw[i], raw_want[(rec["name"], i)]
            d = abs(r - rw) / max(abs(rw), 1e-30)
            worst = max(worst, d)
            assert d <= 1e-5, (rec["name"], i, r, rw)
            # the scores the map reads: ln speedup of a log-output model
            s0, s1 = (math.log(r), math.log(rw)) if log_output else (r, rw)
            bound = 1e-5 + steepest_slope(cal, s0, s1) * abs(s0 - s1) * 1.01
            dc = abs(math.log(v) - math.log(want))
            worst_cal = max(worst_cal, dc)
            amplified += dc > 1e-5
            assert dc <= bound, (rec["name"], i, v, want, r, rw)
            compared += 1
    assert compared == len(expected) and compared > 0
    print(f"\nlcm.Model vs lcm-predict: {compared} schedules of {len(progs)} programs "
          f"({dropped} dropped by both), largest relative difference {worst:.3g} uncalibrated, "
          f"{worst_cal:.3g} in ln speedup calibrated ({amplified} beyond 1e-5, each within the "
          f"map's slope times the score difference)")


def test_dicts_and_json_strings_give_the_same_answers(model, progs):
    rec = progs[0]
    as_text = model.predict(rec["program"], rec["schedules"], untransformed=rec["untransformed"])
    as_dicts = model.predict(json.loads(rec["program"]), [json.loads(s) for s in rec["schedules"]],
                             untransformed=json.loads(rec["untransformed"]))
    assert np.array_equal(as_text, as_dicts)
    assert np.all(as_text > 0)
    # numpy numbers inside a dict are their JSON numbers
    s = json.loads(rec["schedules"][0])
    comp = sorted(k for k in s if k.startswith("comp"))[0]
    s[comp]["unrolling_factor"] = np.int64(4)
    t = json.loads(rec["schedules"][0])
    t[comp]["unrolling_factor"] = 4
    assert np.array_equal(model.predict(rec["program"], [s], untransformed=rec["untransformed"]),
                          model.predict(rec["program"], [t], untransformed=rec["untransformed"]))
    # a numpy array inside a dict is its list; an object whose __index__ fails is refused
    a = json.loads(rec["schedules"][0])
    b = json.loads(rec["schedules"][0])
    key = next((k for k, v in a[comp].items() if isinstance(v, list) and v), None)
    if key is not None:
        a[comp][key] = np.array(a[comp][key])
        assert np.array_equal(model.predict(rec["program"], [a], untransformed=rec["untransformed"]),
                              model.predict(rec["program"], [b], untransformed=rec["untransformed"]))
    for bad in (np.array([1.5]), np.zeros((2, 2))):
        _, errs = model.predict(rec["program"], [{comp: {"unrolling_factor": bad}}],
                                untransformed=rec["untransformed"], errors="return")
        assert len(errs) == 1  # a list where a number is expected: that schedule's error

    class BadIndex:
        def __index__(self):
            raise ValueError("no index")
    with pytest.raises(lcm.SchemaError) as e:
        model.predict(rec["program"], [{comp: {"unrolling_factor": BadIndex()}}],
                      untransformed=rec["untransformed"])
    assert e.value.reason == "bad_field"


def test_rank_orders_by_predicted_speedup(model, progs):
    rec = max(progs, key=lambda r: len(r["schedules"]))
    v = model.predict(rec["program"], rec["schedules"], untransformed=rec["untransformed"])
    order = model.rank(rec["program"], rec["schedules"], untransformed=rec["untransformed"])
    assert sorted(order.tolist()) == list(range(len(v)))
    assert np.all(np.diff(v[order]) <= 0)


def test_info(model, checkpoint):
    info = model.info
    assert info["weights_path"] == checkpoint
    assert info["ensemble_size"] == 1
    assert info["model"]["comp_embed_layer_sizes"] == [32, 16]
    assert info["parameters"] > 0
    assert info["calibration"] is not None and info["calibration"]["kind"]
    assert info["training_data"]["epoch"] >= 1 and info["training_data"]["val_mape"] > 0
    assert info["device"] == "cpu" and info["threads"] == 1
    assert lcm.Model(checkpoint, calibrated=False).info["calibration"] is None


def test_read_looperset_counts_and_names_skips(workdir):
    lines = subprocess.run(["gzip", "-dc", SYNTH_VALID], capture_output=True,
                           text=True).stdout.splitlines()
    bad = os.path.join(workdir, "bad.jsonl")
    with open(bad, "w") as f:
        f.write(lines[0] + "\n{not json\n" + lines[1] + "\n" + lines[0] + "\n")
    r = lcm.read_looperset(bad)
    got = list(r)
    assert [g["name"] for g in got] == [json.loads(lines[i])["program_name"] for i in (0, 1)]
    assert r.skip_counts == {"line/malformed_json": 1, "program/duplicate_program": 1}
    assert {(s["reason"], s["line"]) for s in r.skips} == {("malformed_json", 2),
                                                          ("duplicate_program", 4)}
    first = json.loads(lines[0])
    assert len(got[0]["schedules"]) == len(first["schedules_list"])
    assert "execution_times" not in json.loads(got[0]["schedules"][1])
    assert got[0]["measured_speedups"][0] == pytest.approx(1.0, rel=0.2)


def eval_rows(text):
    """lcm-eval's table lines from `text`: {label: value} of the rows 'label   value ...'."""
    rows = {}
    for line in text.splitlines():
        parts = line[:28].strip(), line[28:40].strip()
        try:
            rows[parts[0]] = float(parts[1]) if parts[1] != "n/a" else math.nan
        except ValueError:
            pass
    return rows


def test_metrics_equal_lcm_eval(checkpoint, workdir):
    """lcm.eval_table of lcm-predict's predictions = lcm-eval's table, line for line (the same
    metric code on the same numbers; uncalibrated, so that both rank by what they report)."""
    raw = ["eval.weights_path=" + checkpoint, "eval.input_file=" + SYNTH_VALID,
           "training.threads=1", "eval.calibrated=false"]
    r = run_tool("lcm-eval", raw + ["experiment.base_path=" + workdir + "/eval_raw"], workdir)
    out = os.path.join(workdir, "pred_raw.jsonl")
    run_tool("lcm-predict", raw + ["--out", out], workdir)
    names, y, p = [], [], []
    with open(out) as f:
        for line in f:
            row = json.loads(line)
            if row["measured_speedup"] is not None:
                names.append(row["program"]), y.append(row["measured_speedup"])
                p.append(row["predicted_speedup"])
    table = lcm.eval_table(y, p, programs=names)
    lines = table.splitlines()
    assert len(lines) >= 10
    got = r.stdout.splitlines()
    start = got.index(lines[0])
    assert got[start:start + len(lines)] == lines
    s = lcm.metrics(y, p, programs=names)
    assert s["n_datapoints"] == len(y) and len(s["programs"]) == len(set(names))
    one = lcm.metrics([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    assert one["mape"] == 0 and one["spearman"] == pytest.approx(1.0) and one["ndcg"] == 1.0


def test_evaluate_example_reproduces_lcm_eval(checkpoint, workdir):
    """examples/python/evaluate.py (Model.predict + lcm.eval_table) against lcm-eval's table:
    the same rows; values agree to the float rounding of batched forwards (Model scores one
    program per forward, lcm-eval a batch of many), which can move a 6-decimal rounding."""
    r = run_tool("lcm-eval", ["eval.weights_path=" + checkpoint, "eval.input_file=" + SYNTH_VALID,
                              "training.threads=1", "experiment.base_path=" + workdir + "/eval"],
                 workdir)
    ex = subprocess.run([sys.executable, os.path.join(SOURCE_DIR, "examples", "python",
                                                      "evaluate.py"), checkpoint, SYNTH_VALID],
                        capture_output=True, text=True)
    assert ex.returncode == 0, ex.stderr
    want, got = eval_rows(r.stdout), eval_rows(ex.stdout)
    assert len(got) >= 10
    for label, v in got.items():
        assert label in want, label
        assert v == pytest.approx(want[label], rel=0.02, abs=0.005, nan_ok=True), label


# ---- errors: lcm.Error subclasses with the product's message, nothing on stderr ----

def schedule_with(rec, index, comp_field, value):
    s = json.loads(rec["schedules"][index])
    comp = sorted(k for k in s if k.startswith("comp"))[0]
    s[comp][comp_field] = value
    return s


def test_errors(model, checkpoint, progs, workdir, capfd):
    rec = progs[0]
    with pytest.raises(lcm.WeightsError) as e:
        lcm.Model(os.path.join(workdir, "missing.safetensors"))
    assert "missing.safetensors" in str(e.value) and e.value.reason == "load"
    corrupt = os.path.join(workdir, "corrupt.safetensors")
    with open(checkpoint, "rb") as f:
        data = f.read()
    with open(corrupt, "wb") as f:
        f.write(data[: len(data) // 2])
    with pytest.raises(lcm.WeightsError):
        lcm.Model(corrupt)
    with open(corrupt, "wb") as f:
        f.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{not a header}xx" + data[100:200])
    with pytest.raises(lcm.WeightsError):
        lcm.Model(corrupt)
    with pytest.raises(lcm.ConfigError) as e:
        lcm.Model(checkpoint, overrides=["no.such_key=1"])
    assert e.value.reason == "config" and "no.such_key" in str(e.value)
    with pytest.raises(lcm.ConfigError):
        lcm.Model(checkpoint, device="tpu")
    # bad JSON of the program
    with pytest.raises(lcm.SchemaError) as e:
        model.predict("{\"iterators\": ", rec["schedules"])
    assert e.value.reason == "malformed_json"
    # bad JSON of one schedule: that schedule only
    v, errs = model.predict(rec["program"], [rec["schedules"][0], "{oops"],
                            untransformed=rec["untransformed"], errors="return")
    assert v[0] > 0 and math.isnan(v[1]) and errs[0][:2] == (1, "malformed_json")
    # a schedule that cannot be scored (an unrolling factor < 0)
    bad = schedule_with(rec, 1, "unrolling_factor", -3)
    with pytest.raises(lcm.SchemaError) as e:
        model.predict(rec["program"], [rec["schedules"][0], bad], untransformed=rec["untransformed"])
    assert e.value.reason == "bad_unroll_factor" and "schedule 1" in str(e.value)
    v, errs = model.predict(rec["program"], [bad, rec["schedules"][0]],
                            untransformed=rec["untransformed"], errors="return")
    assert math.isnan(v[0]) and v[1] > 0 and [x[:2] for x in errs] == [(0, "bad_unroll_factor")]
    with pytest.raises(lcm.Error):
        model.predict(rec["program"], [bad], errors="ignore")
    # wrong types
    prog = json.loads(rec["program"])
    for program, schedules in [([prog], rec["schedules"]), (prog, rec["schedules"][0]),
                               (prog, {"comp00": {}}), (prog, [3]), (prog, [[json.loads(
                                   rec["schedules"][0])]]), (7, rec["schedules"])]:
        with pytest.raises(lcm.SchemaError) as e:
            model.predict(program, schedules)
        assert e.value.reason == "bad_argument" and "expected" in str(e.value)
    with pytest.raises(lcm.SchemaError):  # a list where the program's dict is expected, as JSON
        model.predict(json.dumps([prog]), rec["schedules"])
    with pytest.raises(lcm.SchemaError):
        model.predict(prog, [{"comp00": {"tiling": {1: 2}}}])
    with pytest.raises(lcm.SchemaError):
        model.predict(prog, [{"comp00": {"unrolling_factor": float("nan")}}])
    with pytest.raises(TypeError):
        lcm.Model(None)
    with pytest.raises(lcm.Error):
        lcm.metrics([1.0, 2.0], [1.0])
    with pytest.raises(lcm.Error):
        lcm.metrics([], [])
    # no metric from a NaN, an infinity or a speedup <= 0: the first bad index is named
    for y, p, where in (([1.0, -2.0, 3.0], [1.0, 2.0, 3.0], "measured[1]"),
                        ([1.0, 2.0, 3.0], [1.0, float("nan"), 3.0], "predicted[1]"),
                        ([0.0, 2.0], [1.0, 2.0], "measured[0]"),
                        ([1.0, 2.0], [1.0, float("inf")], "predicted[1]")):
        with pytest.raises(lcm.Error) as e:
            lcm.metrics(y, p)
        assert e.value.reason == "bad_argument" and where in str(e.value)
    with pytest.raises(lcm.Error) as e:
        lcm.metrics([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], rank=[1.0, float("nan"), 2.0])
    assert "rank[1]" in str(e.value)
    with pytest.raises(lcm.Error) as e:
        lcm.eval_table([1.0, 2.0], [1.0, -1.0], programs=["a", "a"])
    assert "predicted[1]" in str(e.value)
    with pytest.raises(lcm.DataError):
        lcm.read_looperset(os.path.join(workdir, "no_such_file.jsonl"))
    with pytest.raises(lcm.DataError):
        lcm.read_looperset(workdir)
    # huge inputs, bounded as lcm-serve bounds them
    with pytest.raises(lcm.RequestTooLargeError) as e:
        model.predict(rec["program"], [rec["schedules"][0]] * (lcm.MAX_SCHEDULES + 1))
    assert e.value.reason == "too_many_schedules"
    small = lcm.Model(checkpoint, max_json_mib=1)
    with pytest.raises(lcm.RequestTooLargeError) as e:
        small.predict(rec["program"] + " " * (1 << 20), rec["schedules"][:1])
    assert e.value.reason == "request_too_large"
    with pytest.raises(lcm.RequestTooLargeError):
        small.predict(rec["program"], [rec["schedules"][0]] * 4096)
    deep = {}
    node = deep
    for _ in range(100000):
        node["x"] = {}
        node = node["x"]
    with pytest.raises(lcm.SchemaError) as e:
        model.predict(prog, [deep])
    assert e.value.reason == "too_deep"
    with pytest.raises(lcm.SchemaError):  # deep JSON text: the product's iterative parse refuses
        model.predict("[" * 100000, rec["schedules"][:1])
    out, err = capfd.readouterr()
    assert err == "" and out == ""


# ---- threads ----

def test_four_threads_give_one_threads_answers(model, progs):
    jobs = [(r["program"], r["schedules"], r["untransformed"]) for r in progs[:12]]
    one = [model.predict(p, s, untransformed=u, errors="return")[0] for p, s, u in jobs]
    results = [[None] * len(jobs) for _ in range(4)]
    failures = []

    def work(t):
        try:
            for rep in range(3):
                for k in range(len(jobs)):
                    j = (k + t * 3) % len(jobs)
                    p, s, u = jobs[j]
                    results[t][j] = model.predict(p, s, untransformed=u, errors="return")[0]
        except Exception as e:  # noqa: BLE001 - reported below
            failures.append(repr(e))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
    for t in range(4):
        for j in range(len(jobs)):
            assert np.array_equal(results[t][j], one[j], equal_nan=True)


def test_memo_gives_the_whole_forwards_answers(checkpoint, progs):
    """One schedule per call, as a search asks: a Model with the memo (memo_kib, default on)
    answers every schedule of a dozen programs, first time and asked again, bit for bit as one
    without it (memo_kib=0); an out-of-range memo_kib is a ConfigError."""
    memo, plain = lcm.Model(checkpoint), lcm.Model(checkpoint, memo_kib=0)
    compared = 0
    for rec in progs[:12]:
        for rep in range(2):
            for sched in rec["schedules"]:
                a, _ = memo.predict(rec["program"], [sched], untransformed=rec["untransformed"],
                                    errors="return")
                b, _ = plain.predict(rec["program"], [sched], untransformed=rec["untransformed"],
                                     errors="return")
                assert np.array_equal(a, b, equal_nan=True), (rec["name"], rep)
                compared += 1
    assert compared > 0
    with pytest.raises(lcm.ConfigError):
        lcm.Model(checkpoint, memo_kib=1 << 30)


def test_bf16_weights_round_trip(checkpoint, progs):
    """weights="bf16" (lcm-serve --weights bf16) reaches liblcm (info["weights"]) and answers
    one schedule per call within the BF16 rounding of the fp32 answers: 0.02 of the answers'
    spread in ln speedup (tests/test_bf16.cpp justifies the bound), compared uncalibrated (this
    small model's calibration map has steep steps that a score change of 1e-4 can cross); another
    format is a ConfigError."""
    plain = lcm.Model(checkpoint, calibrated=False)
    half = lcm.Model(checkpoint, weights="bf16", calibrated=False)
    assert plain.info["weights"] == "fp32" and half.info["weights"] == "bf16"
    a, b = [], []
    for rec in progs[:8]:
        for sched in rec["schedules"][:20]:
            x, _ = plain.predict(rec["program"], [sched], untransformed=rec["untransformed"],
                                 errors="return")
            y, _ = half.predict(rec["program"], [sched], untransformed=rec["untransformed"],
                                errors="return")
            if np.isfinite(x[0]) and x[0] > 0:
                a.append(math.log(x[0]))
                b.append(math.log(y[0]))
    assert a
    spread = max(abs(v) for v in a)
    assert max(abs(u - v) for u, v in zip(a, b)) <= 0.02 * spread + 1e-12
    with pytest.raises(lcm.ConfigError):
        lcm.Model(checkpoint, weights="fp16")


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_memory_flat_over_10000_calls(model, progs):
    """10,000 calls of one schedule, plus errors: the resident set stays flat (a leak of even
    a few hundred bytes per call would show). The sanitizer build's leak checker runs the same
    loop (leak_check.py)."""
    rec = progs[0]
    prog, sched, untr = rec["program"], rec["schedules"][:1], rec["untransformed"]
    bad = ["{oops"]
    for _ in range(1000):
        model.predict(prog, sched, untransformed=untr)
    before = rss_kib()
    for i in range(10000):
        model.predict(prog, sched, untransformed=untr)
        if i % 10 == 0:
            model.predict(prog, bad, untransformed=untr, errors="return")
            try:
                model.predict("{", sched)
            except lcm.SchemaError:
                pass
    grown = rss_kib() - before
    print(f"\nRSS growth over 10,000 calls: {grown} KiB")
    assert grown < 2048, f"RSS grew {grown} KiB over 10,000 calls"


def leak_blocks(text):
    """The leak reports of a LeakSanitizer log: one text block per "Direct/Indirect leak"."""
    blocks, cur = [], None
    for line in text.splitlines():
        if line.startswith(("Direct leak", "Indirect leak")):
            cur = [line]
            blocks.append(cur)
        elif cur is not None:
            if not line.strip():
                cur = None
            else:
                cur.append(line)
    return ["\n".join(b) for b in blocks]


def lcm_leaks(blocks):
    """The blocks whose allocation stack passes through liblcm or the module, other than the
    module's one-time initialization (PyInit_lcm: pybind11 keeps its registry for the process)."""
    return [b for b in blocks if ("liblcm" in b or "lcm.cpython" in b or "lcm::" in b)
            and "PyInit_lcm" not in b]


def test_leak_filter_finds_lcm_frames():
    """The filter of the leak check fails on a leak through liblcm and passes Python's own."""
    log = ("Direct leak of 40 byte(s) in 1 object(s) allocated from:\n"
           "    #0 0x1 in operator new(unsigned long)\n"
           "    #1 0x2 in lcm::Predictor::score(...) (/b/lib/liblcm.so.0+0x10)\n"
           "\n"
           "Direct leak of 8 byte(s) in 1 object(s) allocated from:\n"
           "    #0 0x3 in malloc\n"
           "    #1 0x4 in _PyObject_Malloc (/usr/bin/python3.11+0x20)\n")
    blocks = leak_blocks(log)
    assert len(blocks) == 2 and len(lcm_leaks(blocks)) == 1


def leak_run(checkpoint, tmp_path, calls):
    """Runs leak_check.py for `calls` calls under the preloaded LeakSanitizer; returns (bytes,
    allocations) it reports as leaked at exit and the report text."""
    log = tmp_path / f"lsan_{calls}"
    env = dict(os.environ)
    env["LD_PRELOAD"] = os.environ["LCM_LIBLSAN"]
    env["LSAN_OPTIONS"] = f"exitcode=0:log_path={log}"
    env["PYTHONMALLOC"] = "malloc"  # every Python object on malloc, so LSan sees its pointers
    r = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "leak_check.py"),
                        checkpoint, SYNTH_VALID, str(calls)], env=env, capture_output=True,
                       text=True)
    assert r.returncode == 0 and f"calls {calls}" in r.stdout, r.stderr[-3000:]
    assert "leak checker loaded" in r.stdout, "LeakSanitizer was not loaded: " + r.stdout
    text = "".join(p.read_text() for p in tmp_path.glob(f"lsan_{calls}*"))
    m = re.search(r"SUMMARY: \w+Sanitizer: (\d+) byte\(s\) leaked in (\d+) allocation", text)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0), text


def test_no_leak_over_10000_calls(checkpoint, tmp_path):
    """LeakSanitizer (the standalone runtime, preloaded into a child interpreter) over 100 and
    over 10,000 calls (leak_check.py: scored schedules, unscoreable ones, programs that raise,
    metrics, readers, Models): what is unfreed at exit may not grow with the calls (a leak of one
    byte per call would add 9,900), and no leak report may pass through liblcm or the module. The
    interpreter's own unfreed objects at exit are the same in both runs."""
    lsan = os.environ.get("LCM_LIBLSAN", "")
    if not os.path.isfile(lsan):
        pytest.skip(f"no LeakSanitizer runtime (liblsan.so, gcc's libsanitizer): {lsan!r}")
    (b100, n100), _ = leak_run(checkpoint, tmp_path, 100)
    (b10k, n10k), text = leak_run(checkpoint, tmp_path, 10000)
    ours = lcm_leaks(leak_blocks(text))
    print(f"\nleak checker: unfreed at exit after 100 calls {b100} bytes in {n100} allocations, "
          f"after 10,000 calls {b10k} bytes in {n10k}; {len(ours)} reports through lcm")
    assert not ours, "\n\n".join(ours[:5])
    assert b10k - b100 < 1024 and n10k - n100 < 10, (b100, n100, b10k, n10k)


# ---- install ----

def test_install_and_import_from_outside_the_build_tree(tmp_path):
    build = os.environ.get("LCM_BUILD_DIR")
    if not build:
        pytest.skip("LCM_BUILD_DIR is not set (CTest sets it)")
    prefix = tmp_path / "prefix"
    r = subprocess.run(["cmake", "--install", build, "--prefix", str(prefix)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    found = [os.path.join(d, f) for d, _, fs in os.walk(prefix) for f in fs
             if f.startswith("lcm.") and f.endswith(".so")]
    assert len(found) == 1, found
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH")}
    env["PYTHONPATH"] = os.path.dirname(found[0])
    r = subprocess.run([sys.executable, "-c", "import lcm; print(lcm.__file__, lcm.__version__)"],
                       cwd=str(tmp_path), env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert str(prefix) in r.stdout


def test_search_example(checkpoint, programs_file):
    """examples/python/search.py finds a scored, measured schedule of a real program."""
    r = subprocess.run([sys.executable, os.path.join(SOURCE_DIR, "examples", "python",
                                                     "search.py"), checkpoint, programs_file],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    m = re.search(r"scored (\d+)", r.stdout)
    assert m and int(m.group(1)) > 0, r.stdout
    assert re.search(r"best found: schedule \d+ .*predicted [0-9.e+-]+x, measured [0-9.e+-]+x",
                     r.stdout), r.stdout
