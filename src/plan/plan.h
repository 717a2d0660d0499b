/*
 * plan.h — the offline planner (DESIGN.md §5; PowerInfer-2 §5): what a
 * bundle file needs per token (the model profile), what a configuration
 * costs on this machine (the cost model, from pinfer hwprobe's figures),
 * the configuration that is fastest under the user's limits (the solver),
 * and the plan file that `pinfer run --plan` reads.
 *
 * The cost model, per decoded token (seconds; every rate measured by
 * hwprobe at the plan's thread count T):
 *
 *   t_token = max(t_path, t_cores)
 *   t_path  = t_fixed + sum over layers l of t_l + c_token
 *   t_cores = the cores' work in t_path (all but the reads' waits, their
 *             CPU and a head read from flash) + R c_m / T:
 *             every read's CPU on the whole machine (hwprobe's read_cpu_us:
 *             the submission, the completion's interrupts and softirqs)
 *             spread over the T cores
 *   t_fixed = sum over types y of W_y / matvec(y, T)
 *             W_y: bytes of type y read every token (attention, output head)
 *   t_l     = t_body + t_la + c_r min(R_l, Q) + t_busy + max(0, t_wait - k_b t_busy)
 *   t_busy  = t_gu + c_r (R_l - min(R_l, Q))
 *             c_r: the time a read's submission holds the submitting thread (hwprobe's
 *             read_issue_us; a file before version 5: the machine's CPU, read_cpu_us): the
 *             reads that go out at once cost it first, the rest overlap reads in flight;
 *             k_b: the share of the disk's rate reads get while the cores compute
 *             (hwprobe's read_busy_k; 1 where not measured or a run's rate applies):
 *             reads overlapped by compute progress at k_b, waited-for ones at the full rate;
 *             t_la: the lookahead's own predictor pass (t_pred) where a later layer
 *             has neurons off its hot prefix
 *   t_body  = t_pred + t_down + c_layer
 *   t_wait  = t_io - min(C_AHEAD t_io, k_b t_win)           the reads the lookahead has not done:
 *             t_win = t_body + t_att / (visits per token)    it reads up to C_AHEAD of a unit's
 *             t_att = t_fixed less the output head's         misses while the step before runs
 *             (0 in the first layer, and without predictors)
 *   t_pred  = predictor bytes / matvec(type, T)
 *   t_gu    = (S_l * g + A_l * u) / rowdot(type, T)        gate of every selected
 *             + S_l * c_n / T                              neuron, up of the active ones,
 *                                                          and each one's gather cost c_n
 *   t_down  = A_l * d / axpy(type, T)                      down rows of the active ones
 *   t_io    = R_l / iops(b, q) + 1 / iops(stride, 1)       the reads of the misses, q = min(Q, R_l),
 *                                                          b = stride M_l / R_l their mean size,
 *                                                          and the last one's latency
 *
 * with g, u, d the row bytes of gate, up, down_t, and per neuron i of layer l
 * (neurons in hotness order):
 *
 *   a_i = activation count / tokens profiled               (pinfer profile)
 *   s_i = r_l a_i + f_l (1 - a_i)                          selected by the predictor:
 *         r_l its recall, f_l its false-positive rate, from recall and precision;
 *         with the file's selection counts (profile, gen-model) the layer's
 *         S_l = r_l A_l / precision_l spread over its neurons as those counts are,
 *         moved to the threshold in probit space: s_i = Phi(Phi^-1(c_i) - d_l)
 *   S_l = sum_i s_i,  A_l = sum_i a_i
 *   h_i = 1 for i < H_l (resident); else the LRU hit probability of the
 *         neuron cache of C slots shared by all layers, by Che's
 *         approximation extended to temporal persistence: each neuron a
 *         two-state chain of rate s_i and persistence kappa_i (from the
 *         file's measured reuse: a latent correlation rho_l per layer, see
 *         pi_mprofile), t_c solves sum over cached candidates of
 *         P(active within t_c tokens) = C, and a use hits when the neuron
 *         was used within the last t_c - 1 tokens (linear between whole
 *         tokens; at kappa 0, h_i = 1 - (1 - s_i)^(t_c - 1) at whole t_c)
 *   M_l = sum_i s_i (1 - h_i)                              misses
 *   R_l = M_l - sum_i m_i m_{i-1},  m_i = s_i (1 - h_i)    reads: neighbours merge
 *
 * The I/O of a layer overlaps the gate/up work of its resident and cached
 * neurons (the engine issues the reads before computing them); the down
 * projection follows. With predictors the engine also reads each unit's
 * predicted misses while the step before computes (the lookahead): its
 * down rows, the attention between layers and the next predictor hide up
 * to C_AHEAD of those reads (82-95% of the misses were read ahead on the
 * planted 47B mixture); the first layer's reads wait whole. c_layer and c_token are fixed overheads (pool
 * barriers, norms, attention over a short context), calibrated once on this
 * machine against measured runs.
 *
 * The solver: under the budget, memory goes first to the fixed region, the
 * session and the I/O buffers; of the rest, a neuron cache of C slots and
 * hot prefixes H_l. For a given C the best H_l are the neurons with the
 * largest s_i across all layers (each resident neuron saves s_i (1 - h_i)
 * expected reads and costs the same bytes), so H follows from one threshold
 * on s. The solver tries every thread count measured, the measured queue
 * depths, and a few cache sizes, and keeps the fastest prediction: an
 * exhaustive search over a small grid, well under a second for 32 layers.
 * Bundles are always read whole (one phase); cluster sizes are the
 * engine's fixed ones.
 *
 * A mixture of experts is planned per unit (one expert of one layer) as a
 * dense model per layer: a_i counts the tokens routed to the expert in
 * which neuron i fired (popularity times frequency), so the threshold on s
 * keeps popular experts' neurons resident first. A unit runs for the share
 * v_l of the tokens routed to it (pinfer.stats.unit_tokens, else
 * n_expert_used / n_expert): its t_l is priced per visit, with S_l / v_l,
 * A_l / v_l, M_l / v_l and R_l / v_l, one unit's predictor and c_layer /
 * n_expert_used, and weighted by v_l. The thresholds stay the predictors'
 * own (no recall search).
 *
 * The predictor thresholds: when the file carries the predictors' logit
 * histograms (profile of a model with predictors, kept by convert), r_l and
 * f_l follow from a threshold per layer, and the solver also chooses them.
 * Every false positive costs a gate row, and a read when it is cold; every
 * neuron missed costs accuracy. For each recall target from the file's own
 * (at least PI_PLAN_MIN_RECALL) up to PI_PLAN_MAX_RECALL, each layer's
 * threshold is the largest whose recall on the histograms reaches the target
 * (pi_pred_hist_thresholds); the solver takes the highest target predicted
 * within PI_PLAN_RECALL_SLACK of the fastest: accuracy where it is nearly
 * free (everything resident: a false positive costs only its gate row), the
 * lowest recall allowed where reads dominate.
 *
 * Two thresholds per layer: a false positive among the resident neurons
 * costs a gate row, one among the cold neurons a read (where it misses the
 * cache). With the logit histograms by group of neurons in the file's order
 * (pinfer.stats.pred_ghist), under a budget, each layer's resident prefix
 * gets a threshold of its own: for the split found at one threshold, each
 * layer takes the pair that reaches the recall target over the layer at the
 * least price per token, a selected resident neuron priced at its gate row
 * and gather, a cold one also at its share of a read (the plan's misses
 * over its selections, reads over misses, at the plan's queue depth); the
 * selection rates of each part move to the pair's in probit space
 * (probit_shift per part), the split is solved again, and so on for a few
 * rounds. The pair plan is kept where it predicts faster than the one
 * threshold's. The pair aims PI_PLAN_PAIR_MARGIN above the target: on the
 * decoded tokens of a planted 7b-l8 pairs chosen for 0.95 and 0.96 on 512
 * profiled tokens recalled 0.948 and 0.960 (the coarser group bins, the
 * group a prefix cuts taken in proportion, and the bundle order's moves
 * off the frequency ranks), where one threshold for 0.95 recalled 0.952.
 * (On a planted 7b-l8 at 570 MiB, the pair plan read 3,183 times a token
 * where one threshold read 4,219, and decoded 1.29x and 1.52x as fast in
 * two series of three rounds alternated.)
 */
#ifndef PI_PLAN_PLAN_H
#define PI_PLAN_PLAN_H

#include "base/status.h"
#include "gguf/gguf.h"
#include "gguf/predhist.h"
#include "kernels/types.h"
#include "plan/hwprobe.h"
#include "store/budget.h"

#include <stdbool.h>
#include <stdint.h>

#define PI_PLAN_MAX_LAYERS 512
#define PI_PLAN_MIN_RECALL 0.95   /* the planner never picks thresholds below this recall */
#define PI_PLAN_MAX_RECALL 0.99
#define PI_PLAN_HEAD_STEPS 8  /* a head on flash: resident prefixes tried, in eighths of its rows */
#define PI_PLAN_RECALL_SLACK 0.03 /* a higher recall is taken while it costs at most this share of speed */
#define PI_PLAN_PAIR_MARGIN 0.004 /* two thresholds per layer aim this much above the recall target */

/* What the cost model needs from a bundle file. */
typedef struct pi_mprofile {
    int64_t n_layer, n_ff, n_embd;
    int64_t n_ctx;
    uint64_t fixed, session, io, min_cold; /* bytes, as the loader charges them (pi_budget_needs) */
    uint64_t kv;            /* of session, the KV cache (it grows with n_ctx) */
    int64_t min_slots;
    int64_t lend_slots;     /* what the cache lends a prompt's streamed FFN (pi_budget_needs.lend_slots):
                               a smaller cache streams it in smaller, slower pieces */
    int max_merge;          /* bundles per read at most (the engine's; 16 when unknown) */
    size_t stride, bundle_mem;
    size_t part_bytes[3];
    pi_type part_type[3];
    uint64_t fixed_by_type[PI_TYPE_COUNT]; /* read every token */
    uint64_t pred_by_type[PI_TYPE_COUNT];
    bool lookahead;         /* the file has predictors: the engine reads each unit's predicted misses
                               while the step before computes (run's default) */
    uint64_t head_bytes;    /* the output head's (of fixed): it runs after the last layer, no read in flight */
    uint64_t head_flash;    /* what the head on flash saves of fixed (pi_budget_needs.head_flash): a budget
                               below the minimum with it resident reads it whole every token, at the
                               disk's sequential rate and with no other read in flight */
    int64_t head_n_rows;    /* the head's rows and bytes per row: a plan may keep a prefix of them */
    size_t head_row_bytes;  /* resident when the head is on flash (pi_plan.head_rows) */
    pi_type head_type;
    uint64_t file_size;
    bool have_stats;        /* activation counts were in the file (else uniform) */
    double tokens;          /* tokens the counts come from */
    double *act;            /* (n_layer * n_ff) a_i */
    double *sel;            /* (n_layer * n_ff) s_i */
    double *sel_file;       /* (n_layer * n_ff) the predictors' selection rates at the file's thresholds
                               (blk.N.ffn_sel_count / tokens), NULL when the file has none */
    double *sel_z;          /* (n_layer * n_ff) Phi^-1 of sel_file, with it */
    double recall[PI_PLAN_MAX_LAYERS], precision[PI_PLAN_MAX_LAYERS];
    char source[96];        /* where recall/precision came from */
    /* temporal persistence, from the file's measured reuse (pinfer.stats.reuse
       at k = 1, the share of a token's active neurons that the token before
       used too). Each neuron fires when a latent normal variable exceeds its
       threshold, and the latent variables of consecutive tokens correlate by
       rho[l] in [0, 0.99], fitted per layer (unit) so that the neurons'
       activation rates give the measured reuse; 0 without it. A neuron's
       persistence then depends on its rate: kappa[l * n_ff + i] =
       (P(selected | selected the token before) - s_i) / (1 - s_i) at its
       selection rate s_i, in [0, 0.95], rare neurons far less than frequent
       ones (recomputed with sel; NULL: 0 everywhere). */
    double rho[PI_PLAN_MAX_LAYERS];
    double *kappa;
    bool have_reuse;
    /* a mixture of experts: n_layer counts its units (layer x expert), each
       run by the tokens routed to it: visit[l] is that share of the tokens
       (pinfer.stats.unit_tokens, else n_expert_used / n_expert); 1 for a
       dense layer. A unit's step costs its own predictor, gate/up, reads and
       down for a token that visits it; per token, visit[l] times that. */
    int64_t n_expert, n_expert_used;
    double visit[PI_PLAN_MAX_LAYERS];
    /* the predictors' logit histograms (pinfer.stats.pred_hist); hist.h
       NULL without: then the file's thresholds stand */
    pi_pred_hist hist;
    /* the same by groups of neurons in the file's order (pinfer.stats.pred_ghist),
       h NULL without (and for a mixture): then one threshold per layer */
    pi_pred_ghist ghist;
    double file_recall;     /* pinfer.predictor.recall_target, 0 when absent */
} pi_mprofile;

/* The profile of a bundle file from its metadata g (activation counts
   blk.N.ffn_act_count and pinfer.stats.tokens; the predictor's held-out
   recall and precision, or gen-model's planted ones) and the figures its
   loader charges (z, from sparse/offload.h's pi_offload_measure). Without
   counts activity is taken as uniform (have_stats false). path names the
   file in messages. */
pi_status pi_mprofile_make(const pi_gguf *g, const char *path, const pi_budget_needs *z, pi_mprofile **out);

/* PI_OK when mem_budget (0: none) holds the profile's minimum, else
   PI_ERR_NOMEM with pi_budget_below_minimum's message (the parts, and -c as
   the lever). */
pi_status pi_mprofile_check_budget(const pi_mprofile *mp, uint64_t mem_budget);
void pi_mprofile_free(pi_mprofile *p);

/* Set the profile's recall, precision and selection rates for thresholds
   at recall target r on its histograms (thr: the thresholds, n_layer, may
   be NULL). PI_ERR_NOT_FOUND without histograms, PI_ERR_INVALID for r
   outside (0, 1]. */
pi_status pi_mprofile_at_recall(pi_mprofile *p, double r, float *thr);

/* Fraction of layer l's activations covered by its first k neurons (the
   hit-rate curve of a hot prefix of k). */
double pi_mprofile_coverage(const pi_mprofile *p, int64_t l, int64_t k);

/* A configuration and what it is predicted to give. */
typedef struct pi_cost {
    double tok_s;
    double ms_fixed, ms_pred, ms_gu, ms_down, ms_io, ms_io_hidden, ms_overhead; /* per token */
    double ms_head_read;    /* of ms_fixed: the output head read from flash (0: resident) */
    double ms_read_cpu;     /* the CPU the reads take on the whole machine (pi_hw_read_cpu_s each); of
                               it the submitting thread's share (pi_hw_read_issue_s) is on the token's
                               path: part at issue, the rest overlapping the reads still in flight */
    double ms_cores;        /* the cores' bound: their work plus the reads' CPU over the threads */
    double resident, hits, misses, reads; /* neurons / reads per token, all layers */
} pi_cost;

typedef struct pi_plan {
    uint64_t mem_budget;     /* 0: everything resident */
    int64_t n_ctx;           /* the KV cache the budget holds */
    int threads;
    int queue_depth;
    uint64_t cache_bytes;    /* neuron cache */
    int64_t head_rows;       /* with the output head on flash: its first head_rows rows resident, the
                                rest read every token (0: all read; pi_offload_opts.head_rows) */
    int64_t n_layer;
    int64_t hot[PI_PLAN_MAX_LAYERS];
    uint64_t resident_bytes; /* what the plan charges in all */
    pi_cost cost;            /* predicted */
    double recall;           /* > 0: the predictor thresholds below, chosen for this recall target;
                                0: the file's thresholds */
    float thr[PI_PLAN_MAX_LAYERS];
    bool split;              /* with recall: the resident prefixes have thresholds of their own, neurons
                                below hot[l] reaching thr_hot[l] (pi_lm.layer_split) */
    float thr_hot[PI_PLAN_MAX_LAYERS];
    char model[512];
    uint64_t model_size;
    bool have_stats;         /* the profile had activation counts (else uniform activity was assumed);
                                not part of the plan file */
} pi_plan;

typedef struct pi_plan_limits {
    uint64_t mem_budget;     /* bytes; 0: unlimited */
    int max_threads;         /* 0: what hwprobe measured */
    double min_speed;        /* tok/s the plan must reach, 0: none */
    double recall;           /* > 0: thresholds for this recall target (needs the histograms);
                                0: the solver chooses when it can */
} pi_plan_limits;

/* Predicted cost of plan p (hot, cache_bytes, threads, queue_depth set). */
void pi_plan_cost(const pi_mprofile *mp, const pi_hw *hw, const pi_plan *p, pi_cost *out);

/* The fastest plan under the limits. PI_ERR_NOMEM when the budget is below
   the model's minimum; PI_ERR_INVALID when min_speed cannot be reached (the
   best plan is still returned in *out). */
pi_status pi_plan_solve(const pi_mprofile *mp, const pi_hw *hw, const pi_plan_limits *lim, pi_plan *out);

/* The plan file: "pinfer-plan 1" then "key value" lines. */
pi_status pi_plan_save(const pi_plan *p, const char *path);
pi_status pi_plan_load(const char *path, pi_plan *p);
pi_status pi_plan_parse(const char *text, size_t n, pi_plan *p); /* errors name the line */

#endif
