/*
 * engine.h — the engine's policy for running a model file (internal to
 * src/api; offline tools may use it): the planner's inputs gathered from a
 * bundle file and this machine, and the plan for a budget.
 *
 * The model profile (plan/plan.h) is read from the file's metadata plus the
 * figures its loader charges (sparse/offload.h); the hardware figures are
 * pinfer hwprobe's, cached per filesystem, measured (quick) and cached the
 * first time. Messages go through base/log.h.
 */
#ifndef PI_API_ENGINE_H
#define PI_API_ENGINE_H

#include "plan/plan.h"

#include <stdbool.h>

/* The planner's profile of a bundle file for a KV cache of n_ctx positions
   (<= 0: the model's training context, at most 4096). PI_ERR_INVALID for a
   file without bundles. */
pi_status pi_engine_profile(const char *path, int64_t n_ctx, pi_mprofile **out);

/* The cached hardware figures for the disk of model_path (or hw_path's), never
   measuring: PI_ERR_NOT_FOUND when there are none. */
pi_status pi_engine_hw_cached(const char *model_path, const char *hw_path, pi_hw *out);

/* Keep the random reads a run achieved (reads per second while one was in
   flight, at that mean size and queue depth) in the cached probe of
   model_path's filesystem, which must exist; its file time stays the
   probe's. pi_engine_hw (the planner's figures) then prices reads at that
   rate instead of the probe's (pi_hw_apply_run), until hwprobe measures
   again; pi_engine_hw_cached (the benchmarks' I/O floor) keeps the probe's.
   The same for the output head's sequential reads with seq_gbs > 0 (the
   rate that prices the head's read from flash) and for compute with
   compute_k > 0 (how much faster a run computed than its plan, priced at
   these figures, predicted; kept as a factor over the probe's memory and
   kernel rates: pi_hw_note_compute). Any may be 0: not noted. The file's path
   into path_out (may be NULL). */
pi_status pi_engine_hw_note_run(const char *model_path, double read_bytes, int queue_depth, double reads_per_s,
                                double seq_gbs, double compute_k, char *path_out, size_t path_n);

/* The hardware figures for running model_path: from hw_path when given,
   else the cached probe of its filesystem, else measured now (hwprobe
   --quick, 10-20 s; warnings say so and how long it took) and cached. */
pi_status pi_engine_hw(const char *model_path, const char *hw_path, pi_hw *out);

/* The fastest plan for the bundle file under lim (pi_plan_solve), with
   out->model and model_size filled and out->have_stats telling whether the
   file had activation counts. A budget below the file's minimum fails
   (PI_ERR_NOMEM) before the machine is measured. PI_ERR_INVALID when
   lim->min_speed cannot be reached (the plan is still filled, the message
   says so); other errors as pi_engine_profile, pi_engine_hw and
   pi_plan_solve. *hw_failed (may be NULL) tells whether the error came from
   measuring the machine, the one failure a caller may plan around. */
pi_status pi_engine_plan(const char *model_path, const char *hw_path, int64_t n_ctx, const pi_plan_limits *lim,
                         pi_plan *out, bool *hw_failed);

#endif
