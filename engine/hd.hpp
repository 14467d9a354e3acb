// LCM_HD marks a function that is compiled for the host and, under nvcc, for the device as well:
// the scalar formulas of the ops (engine/rng.hpp, engine/ops/*_math.hpp) are written once with it
// and used by the CPU code, the CUDA kernels (kernels/*.cu) and the emulated kernels.
#pragma once

#if defined(__CUDACC__)
#define LCM_HD __host__ __device__
#else
#define LCM_HD
#endif
