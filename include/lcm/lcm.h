/* liblcm's C API: the lcm cost model in-process for any language with a C FFI (docs/tools.md
 * "liblcm"). All strings are NUL-terminated UTF-8 JSON as the Tiramisu autoscheduler writes it.
 * Functions that can fail take `err` / `err_size`: on failure they write a one-line message
 * there (truncated to err_size - 1 bytes, always NUL-terminated; err may be NULL). A predictor is
 * safe to use from several threads at once. */
#ifndef LCM_LCM_H
#define LCM_LCM_H
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lcm_predictor lcm_predictor;

/* Opens the checkpoint at weights_path. overrides: n_overrides "key=value" settings (e.g.
 * "training.device=cuda:0"; may be NULL when n_overrides is 0). Returns NULL on failure. */
lcm_predictor* lcm_predictor_open(const char* weights_path, const char* const* overrides,
                                  size_t n_overrides, char* err, size_t err_size);

/* Predicts the speedups of n schedules (schedule_jsons[0..n-1]) of the program program_json
 * into speedups[0..n-1]. untransformed_json may be NULL (the loop tree then comes from the
 * iterators). A schedule that cannot be scored gets 0 (lcm_error_speedup()). Returns 0 on
 * success, or -1 when the program cannot be scored (speedups untouched, message in err). */
int lcm_predictor_predict(lcm_predictor* p, const char* program_json,
                          const char* untransformed_json, const char* const* schedule_jsons,
                          size_t n, double* speedups, char* err, size_t err_size);

/* Learning during search (lcm::Predictor::observe): schedule_json of program_json ran in
 * execution_times_ms[0..n_times-1] (ms, each > 0); untransformed_time_ms is the untransformed
 * schedule's time (NAN: the time of an earlier observation of the untransformed schedule). The
 * program's correction of ln speedup is refitted and applied to its later predictions (no other
 * program's). *measured_speedup (may be NULL) gets the measured speedup. Returns 0, or -1 with
 * the message in err ("bad_execution_times: ...", "no_untransformed_time: ...", the schedule's
 * reason when it cannot be applied). */
int lcm_predictor_observe(lcm_predictor* p, const char* program_json,
                          const char* untransformed_json, const char* schedule_json,
                          const double* execution_times_ms, size_t n_times,
                          double untransformed_time_ms, double* measured_speedup, char* err,
                          size_t err_size);

/* Forgets the observations of program_json, or of every program when it is NULL. Returns 1 when
 * something was forgotten (always for NULL), 0 when the program had none, -1 for a NULL p (or
 * when the call fails, e.g. out of memory). */
int lcm_predictor_reset_observations(lcm_predictor* p, const char* program_json);
/* lcm_predictor_open with what observe() learns: `learning` is PredictorOptions::learning
   ("correction", "finetune,steps=10", ...; NULL: "correction"). */
lcm_predictor* lcm_predictor_open_learning(const char* weights_path, const char* const* overrides,
                                           size_t n_overrides, const char* learning, char* err,
                                           size_t err_size);
/* Blocks until the fine-tuning of every observation so far has run (Predictor::wait_for_learning).
   0, or -1 with the message in err. */
int lcm_predictor_wait_for_learning(lcm_predictor* p, char* err, size_t err_size);

/* Writes the adapted state to path atomically (versioned JSON), or replaces it with the file's.
 * Return 0, or -1 with the message in err. */
int lcm_predictor_save_adaptation(const lcm_predictor* p, const char* path, char* err,
                                  size_t err_size);
int lcm_predictor_load_adaptation(lcm_predictor* p, const char* path, char* err, size_t err_size);

/* What the predictor scores with, as one JSON object (lcm::Predictor::info_json: model sizes,
 * ensemble size, calibration map, training metadata, ...), NUL-terminated; valid until the
 * predictor is closed. NULL for a NULL predictor. */
const char* lcm_predictor_info(const lcm_predictor* p);

/* Frees the predictor (NULL is allowed). */
void lcm_predictor_close(lcm_predictor* p);

/* The speedup reported for a schedule that cannot be scored (0): strictly below every real
 * answer, which is finite and >= e^-50 for every kind of model. */
double lcm_error_speedup(void);

/* The library version, "MAJOR.MINOR.PATCH". */
const char* lcm_version(void);

/* Receives one line of liblcm's warnings and notes (NUL-terminated, no newline), e.g.
 * "lcm: warning: 64 threads requested but this machine has 16 hardware threads; ...", and the
 * `user` pointer given to lcm_set_log_callback. */
typedef void (*lcm_log_callback)(const char* line, void* user);

/* Sets where liblcm's warnings and notes go: callback(line, user), or nowhere when callback is
 * NULL (the default). liblcm never writes to the host's stderr or stdout; errors come back
 * through `err`. Process-wide (lcm::set_log_callback of lcm.hpp sets the same callback) and
 * thread-safe; the callback runs on the thread that calls into liblcm, possibly on several at
 * once. */
void lcm_set_log_callback(lcm_log_callback callback, void* user);

#ifdef __cplusplus
}
#endif
#endif
