"""Learning during search in the Python module (Model.observe, reset, save_adaptation,
load_adaptation) and the simulated search of bench/simulate_search.py on the mini sample (or the
synthetic slice)."""
import importlib.util
import json
import math
import os

import numpy as np
import pytest

import lcm
from conftest import SOURCE_DIR


@pytest.fixture(scope="module")
def progs(programs_file):
    return list(lcm.read_looperset(programs_file))[:6]


def test_observe_moves_only_that_program_toward_the_measurement(checkpoint, progs):
    m = lcm.Model(checkpoint)
    a, b = progs[0], progs[1]
    base_a = m.predict(a["program"], a["schedules"], untransformed=a["untransformed"])
    base_b = m.predict(b["program"], b["schedules"], untransformed=b["untransformed"])
    for i in range(1, min(len(a["schedules"]), 8)):
        m.reset()
        target = base_a[i] * (4.0 if i % 2 else 0.25)
        o = m.observe(a["program"], a["schedules"][i], [2.0 / target],
                      untransformed=a["untransformed"], untransformed_time=2.0)
        assert o["measured_speedup"] == pytest.approx(max(target, 0.01), rel=1e-9)
        assert o["observations"] == 1 and o["scale"] > 0
        after = m.predict(a["program"], a["schedules"], untransformed=a["untransformed"])
        gap = lambda x: abs(math.log(x) - math.log(o["measured_speedup"]))
        assert gap(after[i]) < gap(base_a[i])
        assert (after[i] > base_a[i]) == (target > base_a[i])
        # the order within the program stays the model's (a monotone map)
        assert list(np.argsort(-after, kind="stable")) == list(np.argsort(-base_a, kind="stable"))
        # another program: bit-identical
        assert np.array_equal(m.predict(b["program"], b["schedules"],
                                        untransformed=b["untransformed"]), base_b)
    assert m.reset(a["program"]) is True
    assert m.reset(a["program"]) is False
    assert np.array_equal(m.predict(a["program"], a["schedules"],
                                    untransformed=a["untransformed"]), base_a)


def test_save_reset_load_round_trip_and_errors(checkpoint, progs, tmp_path):
    m = lcm.Model(checkpoint)
    a = progs[0]
    base = m.predict(a["program"], a["schedules"], untransformed=a["untransformed"])
    with pytest.raises(lcm.Error) as e:
        m.observe(a["program"], a["schedules"][1], [1.0], untransformed=a["untransformed"])
    assert e.value.reason == "no_untransformed_time"
    u = m.observe(a["program"], a["untransformed"], [6.0], untransformed=a["untransformed"])
    assert u["untransformed"] and u["measured_speedup"] == pytest.approx(1.0)
    o = m.observe(a["program"], a["schedules"][1], [3.0, 2.0], untransformed=a["untransformed"])
    assert o["measured_speedup"] == pytest.approx(3.0)
    adapted = m.predict(a["program"], a["schedules"], untransformed=a["untransformed"])
    assert not np.array_equal(adapted, base)
    path = str(tmp_path / "adaptation.json")
    m.save_adaptation(path)
    with open(path) as f:
        doc = json.load(f)
    assert doc["format"] == "lcm-adaptation" and doc["version"] == 2
    assert len(doc["programs"]) == 1 and len(doc["programs"][0]["observations"]) == 2
    m.reset()
    assert np.array_equal(m.predict(a["program"], a["schedules"],
                                    untransformed=a["untransformed"]), base)
    m.load_adaptation(path)
    assert np.array_equal(m.predict(a["program"], a["schedules"],
                                    untransformed=a["untransformed"]), adapted)
    for times, initial, reason in [([], 1.0, "bad_execution_times"),
                                   ([0.0], 1.0, "bad_execution_times"),
                                   ([float("nan")], 1.0, "bad_execution_times"),
                                   (["x"], 1.0, "bad_execution_times"),
                                   ([1.0], -1.0, "bad_untransformed_time"),
                                   ([1.0], float("nan"), "bad_untransformed_time")]:
        with pytest.raises(lcm.Error) as e:
            m.observe(a["program"], a["schedules"][1], times, untransformed=a["untransformed"],
                      untransformed_time=initial)
        assert e.value.reason == reason
    with pytest.raises(lcm.SchemaError):
        m.observe(a["program"], [], [1.0], untransformed=a["untransformed"], untransformed_time=1)
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(lcm.Error) as e:
        m.load_adaptation(str(bad))
    assert e.value.reason == "bad_adaptation"
    assert np.array_equal(m.predict(a["program"], a["schedules"],
                                    untransformed=a["untransformed"]), adapted)


def load_simulation():
    spec = importlib.util.spec_from_file_location(
        "simulate_search", os.path.join(SOURCE_DIR, "bench", "simulate_search.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_simulated_search_is_deterministic_and_bounded(checkpoint, programs_file, tmp_path):
    sim = load_simulation()
    args = ["--weights", checkpoint, "--data", programs_file, "--max-programs", "4",
            "--seeds", "3,4", "--budgets", "1,2,5"]
    one = sim.main(args + ["--out-svg", str(tmp_path / "a.svg")])
    two = sim.main(args + ["--out-json", str(tmp_path / "b.json")])
    assert one["per_seed"] == two["per_seed"]  # the same seed, the same numbers
    assert (tmp_path / "a.svg").read_text().startswith("<svg")
    assert json.loads((tmp_path / "b.json").read_text())["budgets"] == [1, 2, 5]
    for searcher, by_seed in one["per_seed"].items():
        for seed, v in by_seed.items():
            r = v["ratio"]
            assert all(0 < x <= 1 for x in r), (searcher, seed, r)
            assert all(x <= y for x, y in zip(r, r[1:])), (searcher, seed, r)
    # the per-program correction is a monotone map: it cannot change the model's search
    for s, v in one["per_seed"]["model"].items():
        corr = one["per_seed"]["model+corr"][s]
        assert corr["ratio"] == v["ratio"] and corr["per_program"] == v["per_program"]
    # fine-tuning can: its searches are those of the model until the first observation
    for s, v in one["per_seed"]["model"].items():
        ft = one["per_seed"]["model+ft"][s]
        assert ft["ratio"][0] == v["ratio"][0]
        assert len(ft["per_program"][0]) == 4
        # the correction on top is monotone again: the same search as fine-tuning alone
        assert one["per_seed"]["model+ft+corr"][s]["per_program"] == ft["per_program"]
    vs = one["versus"]["model+ft"]
    assert all(g + w <= 4 for g, w in zip(vs["better"], vs["worse"]))
    assert vs["better"][0] == vs["worse"][0] == 0  # nothing observed before the first pick


FT = "finetune,synchronous=1,steps=20,lr=0.01"


def test_finetune_moves_that_program_and_leaves_others_bitwise(checkpoint, progs, tmp_path):
    m = lcm.Model(checkpoint, learning=FT)
    a, b = progs[0], progs[1]
    base_a = m.predict(a["program"], a["schedules"], untransformed=a["untransformed"])
    base_b = m.predict(b["program"], b["schedules"], untransformed=b["untransformed"])
    moved = 0
    for i in range(1, min(len(a["schedules"]), 5)):
        m.reset()
        target = base_a[i] * (6.0 if i % 2 else 1 / 6.0)
        o = m.observe(a["program"], a["schedules"][i], [2.0 / target],
                      untransformed=a["untransformed"], untransformed_time=2.0)
        after = m.predict(a["program"], a["schedules"], untransformed=a["untransformed"])
        gap = lambda x: abs(math.log(x) - math.log(o["measured_speedup"]))
        assert gap(after[i]) < gap(base_a[i])
        assert after[i] == pytest.approx(o["corrected_speedup"], rel=1e-5)
        moved += not np.array_equal(after, base_a)
        assert np.array_equal(m.predict(b["program"], b["schedules"],
                                        untransformed=b["untransformed"]), base_b)
    assert moved > 0
    # save, reset, load: the same answers; a fresh Model loads them too
    path = str(tmp_path / "ft.json")
    m.save_adaptation(path)
    adapted = m.predict(a["program"], a["schedules"], untransformed=a["untransformed"])
    with open(path) as f:
        doc = json.load(f)
    assert doc["version"] == 2 and doc["learning"] == "finetune"
    assert len(doc["finetuned"]) == 1 and len(doc["finetuned"][0]["buffer"]) == 1
    assert m.reset() is True
    assert np.array_equal(m.predict(a["program"], a["schedules"],
                                    untransformed=a["untransformed"]), base_a)
    m.load_adaptation(path)
    assert np.array_equal(m.predict(a["program"], a["schedules"],
                                    untransformed=a["untransformed"]), adapted)
    m2 = lcm.Model(checkpoint, learning=FT)
    m2.load_adaptation(path)
    assert np.array_equal(m2.predict(a["program"], a["schedules"],
                                     untransformed=a["untransformed"]), adapted)


def test_finetune_in_the_background_equals_synchronous_after_wait(checkpoint, progs):
    sync = lcm.Model(checkpoint, learning=FT)
    bg = lcm.Model(checkpoint, learning=FT.replace("synchronous=1", "synchronous=0"))
    a = progs[0]
    for m in (sync, bg):
        for i in range(1, min(len(a["schedules"]), 4)):
            m.observe(a["program"], a["schedules"][i], [1.0 + i],
                      untransformed=a["untransformed"], untransformed_time=2.0)
    bg.wait_for_learning()
    assert np.array_equal(
        sync.predict(a["program"], a["schedules"], untransformed=a["untransformed"]),
        bg.predict(a["program"], a["schedules"], untransformed=a["untransformed"]))
    with pytest.raises(lcm.ConfigError):
        lcm.Model(checkpoint, learning="finetune,steps=0")
