/*
 * pinfer — public C API.
 *
 * pinfer runs llama-family language models whose weights do not fit in memory,
 * computing only the FFN neurons a token activates and streaming the rest from
 * flash (the PowerInfer-2 design). This header is the whole surface an
 * application needs: open a GGUF model (optionally under a memory budget),
 * tokenize, evaluate prompts, decode, sample, stream text, read statistics.
 * Link with `pkg-config --cflags --libs pinfer`.
 *
 * Conventions
 *   - Handles are opaque: pi_model, pi_session, pi_sampler, pi_tokenizer,
 *     pi_text_stream. Each has a create/open call and a free/close call;
 *     every free/close accepts NULL.
 *   - Fallible calls return a pi_status (0 ok, negative error) and hand
 *     results back through out-parameters (set to NULL/0 on error). On error,
 *     pi_last_error() returns a message naming the file, offset, field or
 *     argument at fault; it is thread-local and valid until the next failing
 *     call on the same thread.
 *   - Misuse (a NULL handle or pointer, a token outside the vocabulary, more
 *     tokens than the context holds, a session whose model was closed) gives
 *     PI_ERR_INVALID and a message; it never crashes. Pointers into freed
 *     memory cannot be detected, except as stated for sessions below.
 *
 * Lifetimes
 *   - A pi_model is immutable after pi_model_open, except for the flash state
 *     of a model opened with a memory budget (its neuron cache and I/O queue),
 *     which serves one session at a time.
 *   - A pi_session belongs to one pi_model and must be freed before it; a
 *     session used after its model was closed is the caller's error, but
 *     every call on it then returns PI_ERR_INVALID instead of touching freed
 *     memory (only pi_session_free remains useful).
 *   - The pi_tokenizer of a model (pi_model_tokenizer) lives as long as the
 *     model. A pi_sampler and a pi_text_stream are independent objects.
 *   - Returned pointers (logits, pieces, strings in info structs) are
 *     borrowed: valid until the next call on the same object, or for the
 *     object's life where stated.
 *
 * Threads
 *   - A pi_model and its pi_tokenizer may be used from any number of threads
 *     at once (tokenize, detokenize, chat templates, info), and sessions of
 *     one in-memory model may run on different threads concurrently.
 *   - A pi_session, a pi_sampler and a pi_text_stream are used by one thread
 *     at a time. A session drives its own pool of n_threads worker threads.
 *   - pi_generate's stop flag may be set from another thread or a signal
 *     handler.
 */
#ifndef PINFER_H
#define PINFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define PI_API __attribute__((visibility("default")))
#else
#define PI_API
#endif

#define PI_VERSION_MAJOR 0
#define PI_VERSION_MINOR 2
#define PI_VERSION_PATCH 0
#define PI_VERSION_STRING "0.2.0"

/* ---- status, errors, logging ---- */

typedef enum pi_status {
    PI_OK              =  0,
    PI_ERR_IO          = -1, /* the OS refused a read, write, open or map */
    PI_ERR_FORMAT      = -2, /* a file is malformed: a field is out of range */
    PI_ERR_NOMEM       = -3, /* an allocation failed or a budget is exceeded */
    PI_ERR_INVALID     = -4, /* a caller passed a bad argument */
    PI_ERR_UNSUPPORTED = -5, /* valid input this build cannot handle */
    PI_ERR_NOT_FOUND   = -6, /* a key, tensor or file is missing */
    PI_ERR_FULL        = -7, /* a fixed-size queue is full: reap and retry */
} pi_status;

/* Short constant name of a status ("ok", "io", "format", ...). */
PI_API const char *pi_status_str(pi_status st);

/* The message of the last failing call on this thread ("" when none). */
PI_API const char *pi_last_error(void);

/* PI_VERSION_STRING of the library linked. */
PI_API const char *pi_version(void);

/* One line: CPU features detected and the kernel set chosen. Static string. */
PI_API const char *pi_system_info(void);

typedef enum pi_log_level { PI_LOG_ERROR = 0, PI_LOG_WARN = 1, PI_LOG_INFO = 2, PI_LOG_DEBUG = 3 } pi_log_level;

/* Receives the library's messages at or below the level set (warnings such
   as "measuring the hardware now"; never on the per-token path). */
typedef void (*pi_log_fn)(void *ctx, pi_log_level level, const char *msg);

/* Route messages up to `level` to fn (NULL: stderr, "pinfer: warn: ...").
   The default level is warn, or PI_LOG=error|warn|info|debug from the
   environment. Call before other threads use the library. */
PI_API void pi_log_set(pi_log_fn fn, void *ctx, pi_log_level level);

/* ---- model ---- */

typedef struct pi_model pi_model;
typedef struct pi_tokenizer pi_tokenizer;

/* How decode computes the FFN (prompts always take the dense path). */
typedef enum pi_ffn_mode {
    PI_FFN_AUTO = 0,   /* sparse when the model has activation predictors, else dense */
    PI_FFN_DENSE = 1,  /* every neuron */
    PI_FFN_SPARSE = 2, /* a hot prefix plus the neurons the predictor selects */
    PI_FFN_ORACLE = 3, /* exactly the active neurons (every gate computed): for tests */
} pi_ffn_mode;

/* How FFN bundles are read from flash under a memory budget. */
typedef enum pi_io_backend {
    PI_IO_AUTO = 0,  /* io_uring where the kernel allows it, else pread */
    PI_IO_URING = 1, /* io_uring (PI_ERR_UNSUPPORTED where unavailable) */
    PI_IO_PREAD = 2, /* a pool of threads doing preadv */
} pi_io_backend;

/* The neuron cache's replacement policy under a memory budget (chosen by
   replaying activation traces: `pinfer profile --cache-sim`, README). */
typedef enum pi_cache_policy {
    PI_CACHE_AUTO = 0, /* the measured default: SLRU */
    PI_CACHE_LRU = 1,  /* least recently used */
    PI_CACHE_SLRU = 2, /* probation and protected queues: a neuron used once cannot push out one used again */
    PI_CACHE_LFU = 3,  /* least frequently used, with aging */
} pi_cache_policy;

typedef struct pi_model_params {
    int n_threads;          /* threads of each session; 0: the plan's, else one per core */
    int64_t n_ctx;          /* sessions' default context; 0: the plan's, else the model's training
                               context, at most 4096 */
    pi_ffn_mode ffn;        /* sessions' default FFN mode */
    int64_t hot;            /* sparse FFN in memory: neurons of each layer's hot prefix (the most active
                               ones after `pinfer convert --reorder`) always computed as one dense block */
    bool use_mmap;          /* map the file instead of reading it into memory (starts faster, shares the
                               page cache, decodes ~15% slower) */
    uint64_t mem_budget;    /* bytes the model may keep resident, 0: all of it in memory. Needs a bundle
                               file (pinfer convert --bundle): the FFN is read from flash */
    const char *plan_path;  /* a plan from `pinfer plan` (its budget, hot neurons per layer, cache, threads,
                               queue depth); NULL: with mem_budget, plan now */
    bool no_plan;           /* with mem_budget and no plan: a uniform split instead of planning */
    bool plan_in_memory;    /* with plan_path: the whole model in memory, with only the plan's predictor
                               thresholds (the in-memory run that the planned run equals) */
    const char *hw_path;    /* hardware figures for planning; NULL: the cached `pinfer hwprobe` result of
                               the model's filesystem, measured now (~12 s, a warning says so) if none */
    uint64_t cache_bytes;   /* with mem_budget: the neuron cache's share (0: the plan's or the default) */
    pi_io_backend io;
    int queue_depth;        /* reads in flight at most (0: the plan's, else 256) */
    pi_cache_policy cache_policy; /* with mem_budget: the neuron cache's replacement policy */
    bool no_lookahead;      /* with mem_budget: do not read the next layer's likely neurons while a layer
                               computes (the lookahead never changes the output, only when reads happen) */
    float recall;           /* > 0: predictor thresholds for this recall target, per layer, from the file's
                               logit histograms (pinfer profile of the model with predictors, then convert
                               --reorder); 0: under a budget the planner's choice where the file has the
                               histograms, else the file's thresholds */
    int n_seq_max;          /* with mem_budget: sessions that may be open at once (0: 1). The budget holds a KV
                               cache of n_ctx positions and scratch for each (taken before the split is chosen;
                               from a plan file's neuron cache); they share the hot neurons, the neuron cache and
                               the I/O queue, and evaluate one at a time */
} pi_model_params;

/* Defaults: every field 0 / NULL / false, ffn PI_FFN_AUTO. */
PI_API pi_model_params pi_model_default_params(void);

/* Open a GGUF model (llama architecture: Llama, Mistral, Mixtral-style MoE;
   F32/F16/BF16/Q8_0/Q4_0/Q4_K/Q5_K/Q6_K weights; pinfer bundle files;
   PowerInfer PWRI files) with its tokenizer. params NULL: defaults. Errors name the file and
   the field at fault; PI_ERR_NOMEM for a budget below the model's minimum
   (the message gives the minimum and what it is made of). Thread-safe. */
PI_API pi_status pi_model_open(const char *path, const pi_model_params *params, pi_model **out);

/* Close a model (NULL is fine). Sessions still open become unusable. */
PI_API void pi_model_close(pi_model *m);

typedef struct pi_model_info {
    const char *path;           /* strings live as long as the model */
    const char *arch;           /* general.architecture */
    const char *name;           /* general.name, "" when absent */
    const char *activation;     /* FFN activation: "silu", "relu", "drelu" */
    const char *kernels;        /* the kernel set in use ("avx512", "neon", "ref", ...) */
    int64_t n_vocab, n_ctx_train, n_embd, n_layer, n_head, n_head_kv, n_ff, n_expert, n_expert_used;
    bool has_predictor;         /* every layer has an activation predictor (fc1/fc2) */
    bool bundled;               /* a bundle file */
    bool offloaded;             /* opened under a memory budget: the FFN is read from flash */
    pi_ffn_mode ffn;            /* sessions' default mode (never AUTO) */
    int64_t hot;                /* sparse FFN in memory: the hot prefix */
    int64_t n_ctx;              /* sessions' default context */
    int n_threads;              /* sessions' default thread count (0: one per core) */
    uint64_t file_size;
    uint64_t weight_bytes;      /* every tensor bound */
    uint64_t n_params;          /* their elements (weights, including predictors) */
    uint64_t bytes_per_token;   /* weight bytes a dense decode step reads */
    uint64_t ffn_bytes;         /* of them, the dense FFN matrices of all layers */
    bool planned;               /* a plan chose the split (file or on the fly) */
    double plan_tok_s;          /* its predicted decode speed */
    int plan_threads, plan_queue_depth;
    uint64_t plan_cache_bytes;
    float recall;               /* the recall target the predictor thresholds were chosen for (the plan's,
                                   params.recall or the file's); 0: not known */
} pi_model_info;

PI_API pi_status pi_model_get_info(const pi_model *m, pi_model_info *out);

/* Vocabulary size (logits per token); 0 for NULL. */
PI_API int64_t pi_model_n_vocab(const pi_model *m);

/* The model's tokenizer; NULL for NULL. Lives as long as the model. */
PI_API const pi_tokenizer *pi_model_tokenizer(const pi_model *m);

/* Where the memory of a model opened under a budget goes (with a session,
   its KV cache and scratch are charged at open for n_ctx). Without a
   budget, limit is 0 and only `weights` is set. */
typedef struct pi_memory_report {
    uint64_t limit, used;       /* the budget and what is charged against it */
    uint64_t fixed;             /* attention, norms, predictors, output head */
    uint64_t kv, scratch;       /* one session's KV cache and buffers */
    uint64_t io;                /* I/O buffers and per-step tables */
    uint64_t hot;               /* the resident hot neurons */
    uint64_t cache;             /* the neuron cache */
    int64_t hot_min, hot_max;   /* hot neurons per layer */
    int64_t cache_slots;
    uint64_t slot_bytes;
    const char *io_backend;     /* "io_uring", "pread", or "" in memory */
    uint64_t weights;           /* weight bytes in memory (mapped with use_mmap) */
    int queue_depth;            /* reads in flight at most (0 in memory) */
} pi_memory_report;

PI_API pi_status pi_model_memory(const pi_model *m, pi_memory_report *out);

/* The disk's random-read rate as `pinfer hwprobe` measured it for the
   filesystem of the model (or params.hw_path's figures): reads per second of
   read_bytes each with queue_depth in flight, interpolated as the planner
   does. Reads only the cached figures, never measures: PI_ERR_NOT_FOUND when
   this disk has not been measured. */
PI_API pi_status pi_model_read_rate(const pi_model *m, uint64_t read_bytes, int queue_depth, double *reads_per_s);

/* The counters of the block device under the model file (Linux's
   /sys/dev/block/MAJ:MIN/stat, a partition's own where it is one): reads
   completed, bytes they read, their time with the device summed over them,
   and the time the device had any request in flight. Between two calls,
   reads over busy_s is the device's read rate at read_s / busy_s requests
   in flight: the disk's own, where the time a read spends with io_uring
   also holds a read that landed while the cores computed until they reap
   it. Other I/O on the device in between counts too. PI_ERR_NOT_FOUND where
   the filesystem has no block device (tmpfs, overlay) or sysfs is absent. */
typedef struct pi_disk_counts {
    uint64_t reads, bytes;
    double read_s, busy_s;
} pi_disk_counts;
PI_API pi_status pi_model_disk_counts(const pi_model *m, pi_disk_counts *out);

/* Keep the random-read rate a run of this model achieved (reads per second
   while one was in flight, of read_bytes on average, queue_depth deep) in
   the cached `pinfer hwprobe` figures of its filesystem: plans made from
   them afterwards price reads at this rate rather than the probe's, until
   hwprobe measures again (pi_model_read_rate keeps the probe's). The cache
   file must exist; a model opened with params.hw_path is refused
   (PI_ERR_INVALID): that file is the user's, and so are figures the file
   cannot hold (a rate not > 0, a size outside 512 B..64 MiB, a depth
   below 1). The file's path goes to path_out (may be NULL). */
PI_API pi_status pi_model_note_reads(const pi_model *m, double read_bytes, int queue_depth, double reads_per_s,
                                     char *path_out, size_t path_n);

/* The same for the output head read from flash (pi_token_stats's
   head_bytes_read over head_read_s, in GB/s): later plans price the head's
   read at it instead of the probe's sequential rate. A later run averages
   into the figure kept. PI_ERR_INVALID for a rate not > 0 or a model opened
   with params.hw_path. */
PI_API pi_status pi_model_note_head_reads(const pi_model *m, double gbs, char *path_out, size_t path_n);

/* The same for compute: k is how much faster than its plan predicted a
   run under a budget that kept every row in memory decoded (measured tok/s
   over pi_model_info's plan_tok_s); later plans price memory and kernels
   at the cached figures times k (averaged with what a run before kept),
   until hwprobe measures compute again. PI_ERR_INVALID for a k not
   > 0 or a model opened with params.hw_path. */
PI_API pi_status pi_model_note_compute(const pi_model *m, double k, char *path_out, size_t path_n);

/* What a budget must hold to run the bundle file at path with a context of
   n_ctx (0: the default), before any hot neuron, and what would make every
   neuron resident. Reads metadata only. */
typedef struct pi_budget_info {
    uint64_t minimum;           /* the smallest budget pi_model_open accepts */
    uint64_t fixed, kv, scratch, io, min_cache; /* its parts */
    uint64_t ffn_bytes;         /* every FFN neuron resident */
    int64_t n_ctx;
    uint64_t head_flash;        /* below minimum + head_flash the output head stays on flash and is read
                                   whole every token (not in fixed); 0: it cannot (tied to the embedding) */
} pi_budget_info;

PI_API pi_status pi_budget_query(const char *path, int64_t n_ctx, pi_budget_info *out);

/* Measure this machine's memory read bandwidth (GB/s) with n_threads
   threads (0: one per core) over a buffer of `bytes` (0: 1 GiB). Takes about
   a second; allocates the buffer for its duration. */
PI_API pi_status pi_probe_memory_bandwidth(int n_threads, size_t bytes, double *gb_s);

/* ---- tokenizer ---- */

/* Vocabulary size; special token ids, -1 when the vocabulary has none. */
PI_API int32_t pi_tokenizer_n_vocab(const pi_tokenizer *tok);
PI_API int32_t pi_tokenizer_bos(const pi_tokenizer *tok);
PI_API int32_t pi_tokenizer_eos(const pi_tokenizer *tok);
PI_API int32_t pi_tokenizer_eot(const pi_tokenizer *tok);
/* Whether the model wants BOS prepended to a prompt (tokenizer.ggml.add_bos_token). */
PI_API bool pi_tokenizer_add_bos(const pi_tokenizer *tok);
/* Whether id ends generation (EOS, EOT, EOM, or a token named like one), as llama.cpp decides. */
PI_API bool pi_tokenizer_is_eog(const pi_tokenizer *tok, int32_t id);

/* Tokenize text[0..len) (any bytes; invalid UTF-8 is handled as llama.cpp
   does). add_bos prepends BOS (PI_ERR_INVALID when the vocabulary has
   none). parse_special: control tokens written in the text ("<s>",
   "<|im_end|>") become their ids. Writes at most cap ids to out and sets
   *n_out to the number the text needs: PI_ERR_INVALID when that exceeds
   cap, so cap 0 measures. Ids are llama.cpp's, exactly. */
PI_API pi_status pi_tokenize(const pi_tokenizer *tok, const char *text, size_t len, bool add_bos,
                             bool parse_special, int32_t *out, size_t cap, size_t *n_out);

/* The bytes one token contributes to output (not NUL-terminated; may be an
   incomplete UTF-8 sequence: see pi_text_stream). special: control tokens
   give their text instead of nothing. Borrowed for the tokenizer's life. */
PI_API pi_status pi_token_piece(const pi_tokenizer *tok, int32_t id, bool special, const char **piece, size_t *len);

/* Text of n ids (llama.cpp's llama_detokenize without special tokens): at
   most cap bytes into buf, NUL-terminated when it fits, *n_out the full
   length (PI_ERR_INVALID when it does not fit, so cap 0 measures). */
PI_API pi_status pi_detokenize(const pi_tokenizer *tok, const int32_t *ids, size_t n, char *buf, size_t cap,
                               size_t *n_out);

/* Whether text[0..len) is valid UTF-8; if not, *bad_at (may be NULL) is the
   offset of the first bad byte. */
PI_API bool pi_utf8_check(const char *text, size_t len, size_t *bad_at);

/* Streaming detokenization: tokens in, text out in whole UTF-8 characters
   (a character split across tokens is held back until it completes). The
   leading space SentencePiece vocabularies put on the first word after BOS
   is dropped, as the text starts there. */
typedef struct pi_text_stream pi_text_stream;

PI_API pi_status pi_text_stream_create(const pi_tokenizer *tok, pi_text_stream **out);
PI_API void pi_text_stream_free(pi_text_stream *st);
/* Start a new text after token prev (the last prompt token; -1: none). */
PI_API void pi_text_stream_reset(pi_text_stream *st, int32_t prev);
/* The text the token adds, in *text and *len (borrowed until the next call; may be
   empty). PI_ERR_INVALID for a token outside the vocabulary. */
PI_API pi_status pi_text_stream_push(pi_text_stream *st, int32_t token, const char **text, size_t *len);
/* Bytes still held back (an incomplete character at the end), then empty. */
PI_API void pi_text_stream_flush(pi_text_stream *st, const char **text, size_t *len);

/* Chat templates: the model's tokenizer.chat_template is recognised by the
   family it belongs to (ChatML, Llama 2 [INST], Llama 3 headers, Zephyr,
   Gemma), as llama.cpp's built-in templates are; a model without one gets a
   plain "User:/Assistant:" transcript. */
typedef struct pi_chat_message {
    const char *role;    /* "system", "user" or "assistant" */
    const char *content;
} pi_chat_message;

/* The family in use: "chatml", "llama2", "llama3", "zephyr", "gemma", "plain". */
PI_API const char *pi_chat_template(const pi_tokenizer *tok);

/* The prompt text of a conversation (without BOS: pi_tokenize adds it);
   add_assistant appends the opening of the assistant's turn. Writes at most
   cap bytes, NUL-terminated when it fits, *len the full length
   (PI_ERR_INVALID when it does not fit: cap 0 measures; also for an
   unknown role). The text of messages[0..k) is a prefix of the text of
   messages[0..n) for k < n, so a chat can evaluate only what was added. */
PI_API pi_status pi_chat_apply(const pi_tokenizer *tok, const pi_chat_message *msgs, size_t n, bool add_assistant,
                               char *buf, size_t cap, size_t *len);

/* ---- session ---- */

typedef struct pi_session pi_session;

typedef struct pi_session_params {
    int64_t n_ctx;          /* positions the KV cache holds; 0: the model's default (under a budget, at
                               most what the budget holds) */
    int n_threads;          /* 0: the model's default */
    pi_ffn_mode ffn;        /* AUTO: the model's default; DENSE is always possible, SPARSE/ORACLE when the
                               model was opened for them */
} pi_session_params;

PI_API pi_session_params pi_session_default_params(void);

/* A conversation with m: its KV cache, scratch buffers and thread pool,
   sized once (decoding allocates nothing). A model opened under a memory
   budget serves n_seq_max sessions at a time (PI_ERR_INVALID for one more);
   their offload statistics are the model's, summed over them. */
PI_API pi_status pi_session_create(pi_model *m, const pi_session_params *params, pi_session **out);
PI_API void pi_session_free(pi_session *s);

/* Evaluate n tokens at the end of the conversation (a prompt: batched,
   dense FFN; n = 1 takes the decode path). Afterwards pi_session_logits()
   holds the last token's logits. PI_ERR_INVALID when they do not fit in the
   context or an id is outside the vocabulary (nothing is evaluated);
   PI_ERR_IO when a read from flash failed (the session stays at the last
   position completed). */
PI_API pi_status pi_session_eval(pi_session *s, const int32_t *tokens, size_t n);

/* pi_session_eval that also writes every token's logits to logits (n rows
   of n_vocab floats), e.g. for perplexity. */
PI_API pi_status pi_session_eval_logits(pi_session *s, const int32_t *tokens, size_t n, float *logits);

/* Decode one token (the sparse path when the session has one). */
PI_API pi_status pi_session_decode(pi_session *s, int32_t token);

/* Logits (n_vocab floats) of the last token evaluated; borrowed until the
   next call on s. NULL for NULL or before any evaluation. */
PI_API const float *pi_session_logits(const pi_session *s);

/* Positions used and available; -1 for NULL. */
PI_API int64_t pi_session_n_past(const pi_session *s);
PI_API int64_t pi_session_n_ctx(const pi_session *s);
/* Threads the session computes with; -1 for NULL. */
PI_API int pi_session_n_threads(const pi_session *s);
/* The FFN mode the session decodes with (DENSE, SPARSE or ORACLE). */
PI_API pi_ffn_mode pi_session_ffn(const pi_session *s);

/* Forget the conversation. */
PI_API pi_status pi_session_kv_clear(pi_session *s);
/* Keep the first n positions, forget the rest (n <= n_past). */
PI_API pi_status pi_session_kv_truncate(pi_session *s, int64_t n);
/* Drop positions [p0, p0 + n) (p0 + n <= n_past): later positions move down
   by n, their keys re-rotated to their new positions (llama.cpp's context
   shift; the logits then approximate a fresh evaluation). For a chat that
   outgrows its context: keep the system prompt, drop the oldest turns. */
PI_API pi_status pi_session_kv_discard(pi_session *s, int64_t p0, int64_t n);

/* Counters since the session was created or pi_session_reset_stats. */
typedef struct pi_token_stats {
    uint64_t prompt_tokens, decode_tokens; /* evaluated in batches / one at a time */
    double prompt_s, decode_s;             /* wall time spent in them */
    /* sparse FFN, summed over layers and decoded tokens */
    uint64_t neurons_computed;  /* selected: the hot prefix plus predicted */
    uint64_t neurons_active;    /* of them, with a non-zero activation */
    uint64_t ffn_weight_bytes;  /* weight bytes the sparse FFN and the predictors touched */
    /* FFN from flash (models under a budget), summed over decoded tokens */
    uint64_t neurons_resident;  /* selected neurons found in the hot region */
    uint64_t neurons_cached;    /* found in the neuron cache */
    uint64_t neurons_read;      /* read from flash */
    uint64_t reads, reads_merged; /* reads issued; of them covering several neurons */
    uint64_t bytes_read;        /* FFN bundles and embedding rows */
    uint64_t split_steps;       /* layer steps split because the cache could not hold them */
    uint64_t prompt_bytes_read; /* FFN streamed for prompt batches */
    double io_wait_s;           /* decoding blocked on reads */
    double io_busy_s;           /* reads in flight until computed; minus io_wait_s: hidden behind compute */
    double io_queue_s;          /* reads handed to the kernel and not yet reaped: at least one */
    double io_depth_s;          /* over io_queue_s, how many times the time (read-seconds): over io_queue_s,
                                   the mean queue depth the reads ran at */
    uint64_t reads_queued;      /* of reads, those issued with the queue full: they waited for a reap */
    double ffn_s;               /* decode time in the FFN */
    /* the lookahead: neurons read for the next layer while a layer computed */
    uint64_t neurons_ahead;     /* read ahead (their reads are in reads and bytes_read) */
    uint64_t ahead_used;        /* of them, selected by that layer (counted in neurons_read) */
    uint64_t reads_ahead;       /* reads issued ahead */
    uint64_t neurons_ahead_start; /* of neurons_ahead, the first layer's, read as a token starts (guessed
                                     from its embedding, while the first attention computes) */
    uint64_t ahead_start_used;  /* of them, selected by the first layer */
    uint64_t router_guesses;    /* a mixture of experts with the lookahead: next layers' first experts
                                   guessed from the current residual */
    uint64_t router_hits;       /* of them, experts that layer's router then chose */
    /* the output head on flash (a budget below the minimum with it resident): read whole for every
       token's logits, prompts' included; not in reads or bytes_read */
    uint64_t head_uses;         /* its products: one per decoded token, one per prompt batch */
    uint64_t head_bytes_read;
    double head_read_s;         /* reading it and multiplying the rows read */
    int64_t head_rows_resident; /* of its rows, the first ones the plan keeps in memory (not read) */
    int64_t head_rows;          /* its rows in all */
} pi_token_stats;

PI_API pi_status pi_session_stats(const pi_session *s, pi_token_stats *out);
PI_API pi_status pi_session_reset_stats(pi_session *s);

/* One layer's sparse FFN counters (summed over decoded tokens). */
typedef struct pi_layer_stats {
    uint64_t tokens;            /* tokens decoded by the sparse path */
    uint64_t computed;          /* neurons selected (gate row read) */
    uint64_t active;            /* neurons with a non-zero activation */
    uint64_t weight_bytes;      /* FFN and predictor bytes touched */
    uint64_t oracle_active;     /* with the recall check: neurons truly active */
    uint64_t missed;            /* of them not selected (recall = 1 - missed / oracle_active) */
} pi_layer_stats;

/* PI_ERR_INVALID for a layer out of range or a dense session. */
PI_API pi_status pi_session_layer_stats(const pi_session *s, int64_t layer, pi_layer_stats *out);

/* Sparse sessions: also compute every gate to count the predictor's misses
   (oracle_active, missed). Costs a dense gate pass per layer; the output is
   unchanged. PI_ERR_INVALID for a session that is not sparse. */
PI_API pi_status pi_session_set_recall_check(pi_session *s, bool on);

/* ---- sampler ---- */

/* The chain follows llama.cpp's default order: repetition penalty over the
   last repeat_last_n tokens, top-k, top-p, min-p, then temperature and a
   draw. temp <= 0 is greedy. The same seed and inputs give the same tokens
   on every platform. */
typedef struct pi_sampler_params {
    float temp;             /* <= 0: greedy */
    int32_t top_k;          /* <= 0: off */
    float top_p;            /* >= 1: off */
    float min_p;            /* <= 0: off */
    float repeat_penalty;   /* 1: off */
    int32_t repeat_last_n;  /* tokens the penalty looks back over */
    uint64_t seed;
} pi_sampler_params;

typedef struct pi_sampler pi_sampler;

/* llama.cpp's defaults: temp 0.8, top-k 40, top-p 0.95, min-p 0.05, no penalty (64 tokens), a fixed seed. */
PI_API pi_sampler_params pi_sampler_default_params(void);
/* A sampler over n_vocab logits (pi_model_n_vocab); allocates only here. */
PI_API pi_status pi_sampler_create(const pi_sampler_params *p, int64_t n_vocab, pi_sampler **out);
PI_API void pi_sampler_free(pi_sampler *s);
/* Record a token of the context (prompt or generated) for the penalty. */
PI_API void pi_sampler_accept(pi_sampler *s, int32_t token);
/* Forget the recorded tokens and restart the random sequence from the seed. */
PI_API void pi_sampler_reset(pi_sampler *s);
/* A token drawn from n_vocab logits (not modified); -1 for NULL arguments. */
PI_API int32_t pi_sampler_sample(pi_sampler *s, const float *logits);

/* ---- generation ---- */

typedef enum pi_stop_reason {
    PI_STOP_NONE = 0,
    PI_STOP_LENGTH = 1,   /* n_predict tokens generated */
    PI_STOP_EOG = 2,      /* the model ended its text (the end token is not emitted) */
    PI_STOP_CONTEXT = 3,  /* the context is full (the last token emitted was not evaluated) */
    PI_STOP_CALLER = 4,   /* the callback or the stop flag asked */
} pi_stop_reason;

/* Receives each piece of generated text in whole UTF-8 characters (len may
   be 0 while a character is incomplete), with the token that produced it
   (-1 for the bytes flushed at the end). Return non-zero to stop after it. */
typedef int (*pi_piece_fn)(void *ctx, const char *text, size_t len, int32_t token);

typedef struct pi_generate_params {
    int64_t n_predict;         /* tokens to generate at most; < 0: until the end of text or context */
    bool ignore_eos;           /* keep going past end-of-generation tokens */
    const volatile int *stop;  /* optional: when it reads non-zero, generation stops before the next token */
} pi_generate_params;

PI_API pi_generate_params pi_generate_default_params(void); /* n_predict -1 */

typedef struct pi_generate_result {
    int64_t n_prompt, n_generated;
    double prompt_s, gen_s;    /* wall time: prompt evaluation, then generation */
    pi_stop_reason stop;
} pi_generate_result;

/* Evaluate the prompt (may be empty: continue from the session's last
   logits), then sample, emit and decode tokens until n_predict, the end of
   text, a full context, the callback or the stop flag. Prompt and generated
   tokens are recorded in the sampler. on_piece may be NULL; res may be NULL.
   Errors as pi_session_eval; a failure mid-way leaves the tokens emitted so
   far in the session. */
PI_API pi_status pi_generate(pi_session *s, pi_sampler *smp, const int32_t *prompt, size_t n_prompt,
                             const pi_generate_params *params, pi_piece_fn on_piece, void *ctx,
                             pi_generate_result *res);

#ifdef __cplusplus
}
#endif
#endif /* PINFER_H */
