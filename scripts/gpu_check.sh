#!/usr/bin/env bash
# The one prepared GPU check of the CUDA backend, in two halves:
#   scripts/gpu_check.sh build   on the build machine (no GPU needed): a portable build
#                                (-DLCM_NATIVE=OFF, sm_90 for the H200 lent here; GPU_CHECK_ARCHS="80;90" adds
#                                the A100: every binary embeds the kernels once per architecture, and the bundle
#                                must stay under the 64 MiB carry limit) and a bundle in build-gpu/bundle
#                                of the GPU test and bench binaries plus the non-system shared
#                                libraries they need (yaml-cpp, ...), small enough to carry (< 64 MiB).
#   scripts/gpu_check.sh run     on the GPU machine, from the repository root, with build-gpu/bundle
#                                carried: nvidia-smi, the GPU tests (every op on CPU and CUDA, gradient
#                                checks in double on the GPU, AdamW, clipping, arena; launch counts and CUDA
#                                graph replay of a training step (test_device_graph); cost-model training
#                                steps and lcm-train/lcm-pretrain CPU vs GPU on the real sample), compute-sanitizer
#                                data placement (resident vs streamed batches, bench_streaming: copy/compute
#                                overlap), bench_cuda and the PyTorch reference's bench_torch.py --device cuda side
#                                by side, the whole cost model (bench_model --device cuda:0 vs bench_reference.py
#                                --device cuda: training datapoints/s, one-program inference latency, on the same
#                                exported batches; launches per step; again with --cuda-graphs), lcm-train's
#                                datapoints/s on the sample with training.cuda_graphs off and on (and the
#                                28M-schedule epoch time at each rate), then compute-sanitizer memcheck where
#                                the runtime allows it,
#                                in the time left (GPU_CHECK_BUDGET_S, default 330 s in all). Everything goes
#                                to ${OUT:-build-gpu/out}/gpu_check.log; the exit status is non-zero
#                                when a test or memcheck fails.
# cuBLAS is linked dynamically (libcublas.so.13): `run` looks for it in the bundle, the CUDA toolkit
# and PyTorch's nvidia-cublas wheel (the H200 image has CUDA 13.0 and driver 580).
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
BUNDLE=${GPU_CHECK_BUNDLE:-build-gpu/bundle}  # (another bundle: a dry run of `run` with emulated-CUDA binaries)

case "$mode" in
  build)
    set -e
    mkdir -p build-gpu
    cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DLCM_NATIVE=OFF -DLCM_CUDA=ON -DLCM_CUDA_EMULATE=OFF \
      -DLCM_CUDA_ARCHITECTURES="${GPU_CHECK_ARCHS:-90}" | tee build-gpu/configure.log | grep "lcm: CUDA kernels ON" ||
      { echo "gpu_check: nvcc not found, no CUDA build (see build-gpu/configure.log)" >&2; exit 1; }
    # lcm-train / lcm-pretrain: test_cuda_model and test_device_batch_store run them on cuda:0 and cpu
    # (next to themselves in the bundle)
    cmake --build build-gpu --target test_backends test_device test_device_graph test_cuda_model \
      test_device_batch_store bench_cuda bench_streaming bench_model bench_export_batch lcm-train lcm-pretrain \
      -j "${LCM_JOBS:-2}"
    rm -rf "$BUNDLE"
    mkdir -p "$BUNDLE/lib"
    for b in test_backends test_device test_device_graph test_cuda_model test_device_batch_store bench_cuda \
      bench_streaming bench_model bench_export_batch lcm-train lcm-pretrain; do
      cp "build-gpu/bin/$b" "$BUNDLE/"
      strip "$BUNDLE/$b"  # symbols stay in build-gpu/bin; the carry limit is 64 MiB
    done
    # The real sample for the end-to-end test and the model benchmark (../shared does not travel).
    mkdir -p "$BUNDLE/data/looperset-sample"
    for f in mini train valid; do cp "../shared/data/looperset-sample/$f.jsonl.gz" "$BUNDLE/data/looperset-sample/"; done
    # Shared libraries outside glibc / the C++ runtime / the CUDA driver travel with the binaries.
    for b in "$BUNDLE"/test_backends "$BUNDLE"/bench_cuda "$BUNDLE"/lcm-train "$BUNDLE"/lcm-pretrain; do
      ldd "$b" | awk '/=> \//{print $3}' | while read -r lib; do
        case "$(basename "$lib")" in
          libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libgcc_s.so*|libstdc++.so*|libcuda.so*) ;;
          libcublas.so*|libcublasLt.so*) ;;  # 600 MB: taken from the GPU machine's CUDA 13 instead
          *) cp -L "$lib" "$BUNDLE/lib/" ;;
        esac
      done
    done
    # This machine's C++ runtime, used there only if the GPU machine's own is too old.
    mkdir -p "$BUNDLE/lib-cxx"
    cp -L "$(ldd "$BUNDLE/test_backends" | awk '/libstdc\+\+/{print $3}')" "$BUNDLE/lib-cxx/" 2>/dev/null || true
    du -sh "$BUNDLE"
    echo "bundle ready: carry $BUNDLE and run: scripts/gpu_check.sh run"
    ;;
  run)
    OUTDIR=${OUT:-build-gpu/out}
    mkdir -p "$OUTDIR"
    LOG="$OUTDIR/gpu_check.log"
    status=0
    {
      echo "== lcm gpu_check $(date -u +%FT%TZ)"
      nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || true
      cublas_dirs=""
      for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
        [ -e "$d/libcublas.so.13" ] && cublas_dirs="$cublas_dirs:$d"
      done
      pyd=$(python3 - <<'EOF' 2>/dev/null
import glob, os, site
roots = site.getsitepackages() + [site.getusersitepackages()]
hits = [os.path.dirname(p) for r in roots for p in glob.glob(os.path.join(r, "nvidia", "**", "libcublas.so.13"), recursive=True)]
print(":".join(sorted(set(hits))))
EOF
)
      [ -n "$pyd" ] && cublas_dirs="$cublas_dirs:$pyd"
      # Only lcm's binaries get the bundle's libraries (python3/PyTorch below keep the image's own).
      LCM_LIBS="$PWD/$BUNDLE/lib$cublas_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      if LD_LIBRARY_PATH="$LCM_LIBS" ldd "$BUNDLE/test_backends" 2>&1 | grep -q "GLIBCXX.*not found"; then
        LCM_LIBS="$PWD/$BUNDLE/lib-cxx:$LCM_LIBS"
      fi
      echo "lcm binaries: LD_LIBRARY_PATH=$LCM_LIBS"
      LD_LIBRARY_PATH="$LCM_LIBS" ldd "$BUNDLE/test_backends" | grep -E "not found|cublas|stdc" || true
      lcm() { LD_LIBRARY_PATH="$LCM_LIBS" "$@"; }
      echo "== test_device"
      lcm timeout 60 "$BUNDLE/test_device" || status=1
      echo "== test_backends (every op on CPU and cuda:0)"
      lcm timeout 120 "$BUNDLE/test_backends" --no-path-filenames || status=1
      echo "== test_device_graph (launch counts; CUDA graphs: a captured training forward + loss + backward replays to the uncaptured step's loss, predictions and gradients; dropout, clipping and AdamW read per step from the device; lcm-train with training.cuda_graphs off/on: the same weights; launches per step)"
      lcm timeout 120 "$BUNDLE/test_device_graph" --no-path-filenames || status=1
      echo "== test_cuda_model (training steps CPU vs cuda:0 on real batches: MAPE, log_huber+pairwise / log_mse+pairwise / log_l1+pairwise with clipping, encoder; lcm-pretrain / lcm-train runs; GPU checkpoint on the CPU)"
      LCM_SHARED_DATA="$PWD/$BUNDLE/data" lcm timeout 150 "$BUNDLE/test_cuda_model" --no-path-filenames || status=1
      echo "== test_device_batch_store (data placement: resident/streamed batches vs per-step upload on cuda:0)"
      LCM_SHARED_DATA="$PWD/$BUNDLE/data" lcm timeout 90 "$BUNDLE/test_device_batch_store" --no-path-filenames || status=1
      echo "== bench_cuda"
      # --require-device: on the GPU machine a missing device is a failure, not a skip.
      LD_LIBRARY_PATH="$LCM_LIBS" timeout 90 "$BUNDLE/bench_cuda" --require-device || status=1
      echo "== PyTorch side by side: bench/reference/bench_torch.py --device cuda (same shapes, FP32)"
      timeout 90 python3 bench/reference/bench_torch.py --device cuda --threads 4 || echo "bench_torch failed"
      echo "== cost model side by side on cuda:0 (same exported batches: lcm-train's first 24, batch 512)"
      M=$OUTDIR/model_batches
      rm -rf "$M"
      D=$PWD/$BUNDLE/data/looperset-sample
      LD_LIBRARY_PATH="$LCM_LIBS" timeout 60 "$BUNDLE/bench_export_batch" --data "$D/train.jsonl.gz" --dump 24 \
        --dump-dir "$M/train" --cache-dir "$M/cache" --batch-size 512 --min-functions-per-footprint 2 >/dev/null &&
        LD_LIBRARY_PATH="$LCM_LIBS" timeout 60 "$BUNDLE/bench_export_batch" --data "$D/valid.jsonl.gz" \
          --cache-dir "$M/cache" --programs-dir "$M/programs" --program-schedules 100 --min-functions-per-footprint 0 \
          >/dev/null || echo "bench_export_batch failed"
      LD_LIBRARY_PATH="$LCM_LIBS" timeout 90 "$BUNDLE/bench_model" --device cuda:0 --batch-dir "$M/train" --epochs 2 \
        --infer-dir "$M/programs" --infer-reps 30 || status=1
      echo "== the same training with CUDA graphs (each batch's forward + loss + backward captured once, replayed; launches per step)"
      LD_LIBRARY_PATH="$LCM_LIBS" timeout 90 "$BUNDLE/bench_model" --device cuda:0 --batch-dir "$M/train" --epochs 2 \
        --cuda-graphs || status=1
      timeout 120 python3 bench/reference/bench_reference.py --device cuda --threads 4 --batches "$M/train" \
        --passes 2 --infer-dir "$M/programs" --infer-reps 30 || echo "bench_reference failed"
      rm -rf "$M"
      echo "== bench_streaming (resident vs streamed vs per-step upload; does the copy stream overlap compute?)"
      LD_LIBRARY_PATH="$LCM_LIBS" timeout 60 "$BUNDLE/bench_streaming" --require-device \
        --data "$BUNDLE/data/looperset-sample/mini.jsonl.gz" || status=1
      echo "== lcm-train on cuda:0, the sample, batch 512, 2 epochs, training.cuda_graphs off then on: datapoints/s of epoch 2 (every graph captured in epoch 1)"
      T=$OUTDIR/train_graphs
      rm -rf "$T"
      for g in off on; do
        lcm timeout 150 "$BUNDLE/lcm-train" --config configs/default.yaml -q \
          data.train_file="$D/train.jsonl.gz" data.valid_file="$D/valid.jsonl.gz" \
          experiment.base_path="$T/$g" experiment.name="graphs_$g" training.device=cuda:0 \
          training.cuda_graphs="$g" training.max_epochs=2 training.early_stop_patience=0 \
          data.batch_size=512 training.calibrate=false >"$T.$g.log" 2>&1 || { status=1; tail -n 5 "$T.$g.log"; }
        grep -E "cuda graphs" "$T.$g.log" || true
        python3 - "$T/$g/log_graphs_$g.jsonl" "$g" <<'EOF' || status=1
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
dps = float(rows[-1]["datapoints_per_s"])
print(f"lcm-train cuda_graphs={sys.argv[2]}: {dps:.0f} datapoints/s in epoch {rows[-1]['epoch']} "
      f"(train loss {rows[-1].get('train_loss')}); a 28M-schedule epoch at that rate: {28e6 / dps / 60:.1f} min")
EOF
      done
      rm -rf "$T" "$T.off.log" "$T.on.log"
      left=$(( ${GPU_CHECK_BUDGET_S:-330} - SECONDS ))
      echo "== compute-sanitizer memcheck on test_backends (CPU-vs-CUDA comparisons, dropout, AdamW, arena), ${left} s left"
      CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer \
             /usr/local/cuda/compute-sanitizer/compute-sanitizer 2>/dev/null | head -1)
      if [ -z "$CS" ]; then
        echo "compute-sanitizer not found: memcheck not run"
      elif [ "$left" -lt 30 ]; then
        echo "memcheck not run: under 30 s of the budget left"
      else
        LD_LIBRARY_PATH="$LCM_LIBS" timeout "$left" "$CS" --tool memcheck --leak-check no --report-api-errors no \
          --error-exitcode 3 "$BUNDLE/test_backends" -tc="every op: CUDA values*,CUDA:*" ||
          { rc=$?; echo "memcheck exit $rc"; [ $rc -eq 3 ] && status=1; }
      fi
      echo "== done, status $status"
    } 2>&1 | tee "$LOG"
    # The status of the block, not of tee.
    grep -q "== done, status 0" "$LOG"
    ;;
  *)
    echo "usage: scripts/gpu_check.sh build|run" >&2
    exit 2
    ;;
esac
