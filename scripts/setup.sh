#!/usr/bin/env bash
# Installs every build and test dependency of lcm from Debian packages. Idempotent: installs only
# what is missing and is quiet when everything is already there. Run as root (or with sudo).
set -euo pipefail
# clang, libclang-rt-14-dev (libFuzzer, the sanitizer runtimes) and libomp-dev (OpenMP under
# Clang, which the configure step requires) are for the fuzz build (scripts/test_fuzz.sh).
# python3-dev, pybind11-dev, python3-pybind11, python3-numpy, python3-pytest: the Python module
# (python/, LCM_PYTHON) and its tests (tests/python, run with /usr/bin/python3 -m pytest).
# libopenmpi-dev and openmpi-bin: data-parallel lcm-train under mpirun (optional at build time,
# LCM_MPI; tests/test_mpi.cpp runs mpirun).
# libdnnl-dev (oneDNN): the CPU backend's float GEMM kernel (CMake LCM_GEMM=auto; Eigen without it).
PKGS=(cmake make g++ pkg-config libeigen3-dev rapidjson-dev libyaml-cpp-dev zlib1g-dev
      doctest-dev libcli11-dev clang-format clang libclang-rt-14-dev libomp-dev
      libopenmpi-dev openmpi-bin libdnnl-dev
      python3-dev pybind11-dev python3-pybind11 python3-numpy python3-pytest)
# Optional extra for the PyTorch side-by-side benchmarks and fixture regeneration (not needed by CI):
#   LCM_SETUP_REFERENCE=1 scripts/setup.sh   adds python3-torch python3-numpy libopenblas0-openmp,
#   and the GEMM libraries bench/bench_peak.cpp compares (libblis4-openmp, libxsmm-dev)
if [[ "${LCM_SETUP_REFERENCE:-0}" == "1" ]]; then
  PKGS+=(python3-torch python3-numpy libopenblas0-openmp libblis4-openmp libxsmm-dev)
fi
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
