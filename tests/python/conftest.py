"""Fixtures of the Python module's tests (tests/python): a tiny checkpoint trained by the build's
lcm-train in a temporary folder, and the programs to score (../shared's mini sample when it is
there, else the committed synthetic slice tests/data/synth_valid.jsonl.gz).

Run by CTest (test_python) as `<python> -m pytest tests/python` with PYTHONPATH holding the
build's module and LCM_BIN_DIR its lcm-* tools."""
import os
import subprocess

import pytest

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN_DIR = os.environ.get("LCM_BIN_DIR", os.path.join(SOURCE_DIR, "build", "bin"))
SYNTH_TRAIN = os.path.join(SOURCE_DIR, "tests", "data", "synth_train.jsonl.gz")
SYNTH_VALID = os.path.join(SOURCE_DIR, "tests", "data", "synth_valid.jsonl.gz")
# ../shared/data beside the checkout, or $LCM_SHARED_DATA (as tests/support/test_support.hpp)
SHARED_DATA = os.environ.get("LCM_SHARED_DATA", os.path.join(SOURCE_DIR, "..", "shared", "data"))
SHARED_MINI = os.path.join(SHARED_DATA, "looperset-sample", "mini.jsonl.gz")


def run_tool(name, args, cwd):
    """Runs build/bin/<name> with `args`; returns the CompletedProcess (fails the test on exit != 0)."""
    env = dict(os.environ)
    if "LCM_TOOL_ASAN_OPTIONS" in env:  # the sanitizer build: the tools' own leak checking
        env["ASAN_OPTIONS"] = env["LCM_TOOL_ASAN_OPTIONS"]
    r = subprocess.run([os.path.join(BIN_DIR, name)] + args, cwd=cwd, capture_output=True,
                       text=True, env=env)
    assert r.returncode == 0, f"{name} {' '.join(args)}: exit {r.returncode}\n{r.stderr}"
    return r


@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("lcm_python"))


@pytest.fixture(scope="session")
def checkpoint(workdir):
    """A small cost model (comp layers 32,16, embeddings 8) trained 2 epochs on the committed
    synthetic slice, with its calibration map: tests/support/tiny_run.hpp's settings."""
    base = os.path.join(workdir, "run")
    run_tool("lcm-train", [
        "data.train_file=" + SYNTH_TRAIN, "data.valid_file=" + SYNTH_VALID,
        "experiment.base_path=" + base, "data.batch_size=32", "training.threads=1",
        "data.nb_workers=1", "training.max_epochs=2", "training.early_stop_patience=0",
        "model.comp_embed_layer_sizes=32,16", "model.drops=0.05,0.05",
        "model.lstm_embedding_size=8", "model.expr_embed_size=8", "training.calibration_folds=0"
    ], workdir)
    path = os.path.join(base, "weights", "best_model_lcm.safetensors")
    assert os.path.isfile(path)
    return path


@pytest.fixture(scope="session")
def programs_file():
    """The mini sample of ../shared when present (60 real programs), else the synthetic slice."""
    if os.path.isfile(SHARED_MINI):
        return SHARED_MINI
    print(f"\nNOTE {SHARED_MINI} is absent: using {SYNTH_VALID} instead")
    return SYNTH_VALID
