/* kiln.h: the C API of kiln, the one public ABI (C11).
 *
 * A runtime owns the worker threads and the memory budget; a model is a mapped .kiln (or a source
 * model compiled in memory), immutable and shared by its sessions; a session is one conversation:
 * its KV cache, its sampler, its position.
 *
 * Errors: every call that can fail returns a kiln_status; KILN_OK is 0. The calling thread's
 * kiln_last_error() then says what failed, where and why (the file, the place, the problem).
 * Nothing aborts and no C++ exception crosses this edge.
 *
 * Parameter structs: fill them with the matching *_default_params() and change what you need;
 * each carries its own size in `size`, so that a library built later can tell which fields a
 * caller knows. Pass NULL for the defaults. Getters that fill a struct are named kiln_x_get.
 *
 * Buffers: a call that fills a caller's buffer writes the size it needs to an out parameter and,
 * when that is more than the buffer holds, writes nothing and returns KILN_E_BUFFER_TOO_SMALL:
 * ask again with the size it said. (kiln_session_logits needs the vocabulary's size, which
 * kiln_model_info_get gives.)
 *
 * Two levels: text in, text out (kiln_session_generate, kiln_session_chat and their _async forms,
 * which run on the runtime's job threads), and tokens in, logits out (kiln_session_decode,
 * kiln_session_logits, kiln_session_sample, kiln_session_truncate), for an app's own sampler,
 * speculative decoding or constrained output. Both work on the same session and KV cache.
 *
 * Threads: a runtime, a model and their info calls may be used from any thread. A session is used
 * by one thread at a time; kiln_session_cancel() and kiln_session_stats_get() may be called from any
 * thread, at any time. Sessions of one model generating at the same time have their decode tokens
 * batched into one step (each weight read once for all of them). Calling a session's generating
 * function from inside its own callback is
 * KILN_E_REENTRANT, not a deadlock. Handles are checked: a freed or unknown handle is
 * KILN_E_INVALID_ARGUMENT, never a crash (free functions ignore them).
 */
#ifndef KILN_H
#define KILN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define KILN_API __attribute__((visibility("default")))
#else
#define KILN_API
#endif

#define KILN_VERSION_MAJOR 0
#define KILN_VERSION_MINOR 3
#define KILN_VERSION_PATCH 0
/* The ABI this header describes; raised whenever a struct or a call changes incompatibly (1: the
 * token-level calls, kiln_sampling_params, KILN_E_BUFFER_TOO_SMALL, kiln_model_info_get). Compare
 * it with kiln_api_version() to find a library built from another header. */
#define KILN_API_VERSION 1

typedef enum kiln_status {
  KILN_OK = 0,
  KILN_E_INVALID_ARGUMENT, /* a NULL or freed handle, a value out of range, invalid UTF-8, ... */
  KILN_E_IO,               /* the operating system refused: missing file, unwritable folder */
  KILN_E_FORMAT,           /* the bytes of a file are malformed: a corrupt .kiln or session file */
  KILN_E_UNSUPPORTED,      /* well-formed, but not something this build handles */
  KILN_E_OUT_OF_MEMORY,    /* an allocation failed */
  KILN_E_BUDGET,           /* the runtime's memory budget cannot hold it (the message: needed, held) */
  KILN_E_CANCELLED,        /* kiln_session_cancel(), or a progress callback that returned non-zero */
  KILN_E_CONTEXT_FULL,     /* the prompt does not fit the session's context */
  KILN_E_REENTRANT,        /* a session called from inside its own callback */
  KILN_E_NOT_FOUND,        /* a file, tensor or chat template is missing */
  KILN_E_INTERNAL,
  KILN_E_BUFFER_TOO_SMALL  /* the caller's buffer cannot hold the answer; the call said how much it needs */
} kiln_status;

/* This thread's last failure, never NULL ("" before any). Valid until this thread's next call. */
KILN_API const char* kiln_last_error(void);
/* "kiln_status" as text: "KILN_E_BUDGET". Never NULL. */
KILN_API const char* kiln_status_name(kiln_status status);
/* "0.3.0". */
KILN_API const char* kiln_version(void);
/* KILN_API_VERSION of the library's own header. */
KILN_API int32_t kiln_api_version(void);

typedef struct kiln_runtime kiln_runtime;
typedef struct kiln_model kiln_model;
typedef struct kiln_session kiln_session;
typedef struct kiln_job kiln_job;

/* ---- runtime ---------------------------------------------------------------------------- */

typedef enum kiln_perf_mode {
  KILN_PERF_BALANCED = 0, /* threads: the cores of the fastest class, at most 4; waits sleep soon */
  KILN_PERF_BURST,        /* every fast core, workers spin between steps: lowest latency */
  KILN_PERF_SUSTAINED,    /* half the fast cores: what a phone holds without throttling */
  KILN_PERF_POWER_SAVER   /* one thread */
} kiln_perf_mode;

typedef enum kiln_log_level { KILN_LOG_ERROR = 0, KILN_LOG_WARN, KILN_LOG_INFO, KILN_LOG_DEBUG } kiln_log_level;
/* Called from the thread that logs; `message` is valid during the call only. */
typedef void (*kiln_log_fn)(void* user_data, kiln_log_level level, const char* message);

typedef struct kiln_runtime_params {
  size_t size;                  /* sizeof(kiln_runtime_params) */
  int32_t n_threads;            /* worker threads, the caller's included; 0: chosen by perf_mode */
  uint64_t memory_budget_bytes; /* models + sessions held at once; 0: no budget */
  kiln_perf_mode perf_mode;
  kiln_log_fn log;              /* NULL: no log */
  void* log_user_data;
} kiln_runtime_params;

KILN_API kiln_runtime_params kiln_runtime_default_params(void);
/* The CPU kernels are the best this machine and its OS allow; the environment variable KILN_CPU
 * (portable, generic, avx2, avx512, amx, neon, dotprod, i8mm) caps them. A name kiln does not
 * know, or a table this machine cannot run, makes this call fail with KILN_E_INVALID_ARGUMENT. */
KILN_API kiln_status kiln_runtime_create(const kiln_runtime_params* params, kiln_runtime** out);
/* Frees the runtime once its models are freed (they keep it alive until then). */
KILN_API void kiln_runtime_free(kiln_runtime* runtime);
/* Releases what can be released now (the app's onTrimMemory): idle models are unmapped and idle
 * sessions' KV caches moved to snapshot files; both come back when used. `released` may be NULL. */
KILN_API kiln_status kiln_runtime_trim(kiln_runtime* runtime, uint64_t* released);

typedef struct kiln_runtime_stats {
  size_t size;                /* sizeof(kiln_runtime_stats) */
  uint64_t memory_budget_bytes;
  uint64_t held_bytes;        /* what the runtime counts as held now: mapped weights, KV, arenas, scratch */
  uint64_t peak_held_bytes;
  int32_t n_threads;
  int32_t n_models;           /* loaded, evicted ones included */
  int32_t n_sessions;
  int32_t n_evictions;        /* models unmapped and sessions snapshotted to make room, so far */
  uint64_t decode_steps;      /* decode steps run so far ... */
  uint64_t decode_tokens;     /* ... and the tokens they carried: sessions decoding at once share steps */
} kiln_runtime_stats;
KILN_API kiln_status kiln_runtime_stats_get(kiln_runtime* runtime, kiln_runtime_stats* out);

/* ---- model ------------------------------------------------------------------------------ */

/* Loading progress, 0..1; return non-zero to cancel the load (KILN_E_CANCELLED). */
typedef int (*kiln_progress_fn)(void* user_data, float fraction);

typedef struct kiln_model_params {
  size_t size;                /* sizeof(kiln_model_params) */
  int32_t priority;           /* under the budget, lower priorities are evicted first; default 0 */
  int32_t verify;             /* non-zero: check the weights' checksum too (reads every page) */
  const char* scheme;         /* a source model (GGUF, HF folder, llama2.c): compiled in memory in this
                                 scheme ("f32", "w4a16", ...); NULL: its own precision (F32/F16/BF16
                                 as stored, GGUF Q4_0/Q4_1 as w4a16 g32). Refused for a .kiln */
  const char* tokenizer_path; /* a source model: another tokenizer; NULL: the model's own */
  kiln_progress_fn progress;  /* NULL: none */
  void* progress_user_data;
  int32_t prefault;           /* non-zero (default): map every weight page while loading, so that the
                                 first token does not wait for page faults; 0: a load is a map and a check */
  int32_t no_cache;           /* 0 (default): a source model is compiled once into the compile cache and
                                 later loads map that file (so is a .kiln rebuilt from its recorded source,
                                 one this machine cannot run as it is); non-zero: compiled in memory on
                                 every load */
  const char* cache_dir;      /* the compile cache's folder; NULL: KILN_CACHE_DIR, else
                                 $XDG_CACHE_HOME/kiln, else ~/.cache/kiln (bounded by KILN_CACHE_MAX_SIZE,
                                 default 8G, least recently used entries removed first) */
} kiln_model_params;

KILN_API kiln_model_params kiln_model_default_params(void);
/* Maps a .kiln (a map and a check), or a source model's entry in the compile cache (compiled into it
 * on the first load), or compiles a source model in memory (no_cache). */
KILN_API kiln_status kiln_model_load(kiln_runtime* runtime, const char* path, const kiln_model_params* params,
                                     kiln_model** out);
/* Maps the .kiln that lies in bytes [offset, offset + length) of the open file `fd` (an Android
 * APK entry stored uncompressed: AAsset_openFileDescriptor64, or AssetFileDescriptor's fd,
 * getStartOffset() and getLength()) in place, without copying; length 0: to the end of the file.
 * `offset` must be a multiple of 16384, so that the .kiln's weights (16 KB-aligned in the file)
 * stay page-aligned in memory on 4 KB- and 16 KB-page devices: the asset stored uncompressed
 * (Gradle noCompress) and the APK aligned with `zipalign -f 16384` (docs/android.md); any other
 * offset is refused (KILN_E_INVALID_ARGUMENT) with a message saying so. kiln keeps its own duplicate of `fd`: the
 * caller's is never closed by kiln and may be closed once this returns. `params->scheme` and
 * `tokenizer_path` must be NULL. */
KILN_API kiln_status kiln_model_load_fd(kiln_runtime* runtime, int fd, uint64_t offset, uint64_t length,
                                        const kiln_model_params* params, kiln_model** out);
/* Called once, on the loading thread (never the caller's); `model` is NULL on failure, and then
 * `error` says why (valid during the call only). The model belongs to the caller. */
typedef void (*kiln_load_done_fn)(void* user_data, kiln_status status, kiln_model* model, const char* error);
/* Loads on a thread of its own; the progress callback runs there too. `out` (may be NULL) gets a
 * job to cancel or wait on; free it with kiln_job_free. */
KILN_API kiln_status kiln_model_load_async(kiln_runtime* runtime, const char* path, const kiln_model_params* params,
                                           kiln_load_done_fn done, void* user_data, kiln_job** out);
/* Asks the job to stop: a load at its next progress point, a generation before its next step
 * (KILN_E_CANCELLED, stop_reason KILN_STOP_CANCELLED). Any thread. */
KILN_API kiln_status kiln_job_cancel(kiln_job* job);
/* Waits until the job's last callback has returned; returns the job's status. From the job's own
 * callback: KILN_E_REENTRANT. */
KILN_API kiln_status kiln_job_wait(kiln_job* job);
/* Waits for the job, then frees it. */
KILN_API void kiln_job_free(kiln_job* job);
/* The weights go when the last session of the model is freed. */
KILN_API void kiln_model_free(kiln_model* model);

typedef struct kiln_model_info {
  size_t size;                 /* sizeof(kiln_model_info) */
  char arch[32];               /* "llama", "qwen2", "qwen3", ... */
  char kind[16];               /* "kiln", "gguf", "hf", "llama2c" */
  char scheme[32];             /* the scheme most weight bytes are in: "w4a16", "f32", ... */
  int64_t n_params;
  int32_t vocab_size;
  int32_t n_layers;
  int32_t dim;
  int32_t n_heads;
  int32_t n_kv_heads;
  int32_t head_dim;
  int32_t n_ctx_max;           /* the model's maximum context */
  int32_t bos_id;              /* -1: none */
  int32_t eos_id;              /* -1: none */
  int32_t has_chat_template;
  uint64_t weight_bytes;       /* the weights as stored */
  uint64_t file_bytes;         /* a .kiln's size; 0 for a source model */
  /* The .kiln's conformance report: the compiled program against the same model in f32, on the
   * compile's --eval text when it had one, else on kiln's built-in text (kiln inspect prints every
   * text). has_conformance 0 (a source model, a file compiled before kiln measured it or with
   * --no-conformance): the four numbers are NaN. */
  int32_t has_conformance;
  double conformance_top1;     /* fraction of tokens whose most likely next token is the f32 one's */
  double conformance_kl;       /* mean KL(f32 || compiled) of the next-token distributions, nats */
  double conformance_ppl_reference;  /* the f32 program's perplexity on the text */
  double conformance_ppl;      /* the compiled program's */
  /* The syntax the chat template asks the model to write tool calls in: "hermes" (Qwen2.5/3:
   * <tool_call>{"name", "arguments"}</tool_call>), "llama3" ({"name", "parameters"}), "mistral"
   * ([TOOL_CALLS][{"name", "arguments"}]); "" when it shows none or there is no template. */
  char tool_call_format[16];
} kiln_model_info;
KILN_API kiln_status kiln_model_info_get(const kiln_model* model, kiln_model_info* out);

/* GBNF (for kiln_generate_params.grammar) that makes the model call a tool in its template's
 * syntax (kiln_model_info.tool_call_format), with arguments valid against the tool's parameters
 * schema: one of `tools_json` (OpenAI's tools array, [{"type": "function", "function": {"name",
 * "parameters"}}]), only the one named `function_name` when not NULL; `parallel` non-zero: one
 * call or more. Written as kiln_detokenize writes (`len` gets the bytes needed). A template with
 * no tool-call syntax, or an unsupported schema keyword: KILN_E_INVALID_ARGUMENT naming it. */
KILN_API kiln_status kiln_tool_call_grammar(const kiln_model* model, const char* tools_json, const char* function_name,
                                            int32_t parallel, char* buf, size_t capacity, size_t* len);

/* Token ids of `text` (len bytes, valid UTF-8). flags: KILN_TOKENIZE_ADD_BOS adds BOS where the
 * vocabulary has one; KILN_TOKENIZE_PARSE_SPECIAL reads special tokens' text as those tokens.
 * `n_ids` gets the count; when it is more than `capacity` nothing is written and the call returns
 * KILN_E_BUFFER_TOO_SMALL (ask again with a buffer of *n_ids). */
#define KILN_TOKENIZE_ADD_BOS 1
#define KILN_TOKENIZE_PARSE_SPECIAL 2
KILN_API kiln_status kiln_tokenize(const kiln_model* model, const char* text, size_t len, int flags, int32_t* ids,
                                   size_t capacity, size_t* n_ids);
/* The text of `ids`, UTF-8 (an incomplete trailing character becomes U+FFFD), not NUL-terminated
 * unless there is room for one; `len` gets the bytes needed (KILN_E_BUFFER_TOO_SMALL as for
 * kiln_tokenize). */
KILN_API kiln_status kiln_detokenize(const kiln_model* model, const int32_t* ids, size_t n_ids, char* buf,
                                     size_t capacity, size_t* len);

/* ---- session ---------------------------------------------------------------------------- */

typedef enum kiln_kv_type { KILN_KV_F32 = 0, KILN_KV_F16 } kiln_kv_type;
/* What a session records of each call, for kiln_session_profile_json(): nothing (no cost), each
 * step's totals (time to first token, prefill and decode rates, memory), or also every program
 * instruction (op, layer, back end, kernel, time, bytes moved, FLOPs, achieved rates). */
typedef enum kiln_profiling { KILN_PROFILE_OFF = 0, KILN_PROFILE_BASIC, KILN_PROFILE_DETAILED } kiln_profiling;
#define KILN_SEED_RANDOM UINT64_MAX

/* How a session picks its next token: the repetition penalty, the frequency and presence
 * penalties, then top_k, top_p, min_p and the temperature (llama.cpp's order). */
typedef struct kiln_sampling_params {
  size_t size;            /* sizeof(kiln_sampling_params) */
  uint64_t seed;          /* KILN_SEED_RANDOM (default): a fresh one per session */
  float temperature;      /* 0: greedy; default 0.8 */
  int32_t top_k;          /* 0: off; default 40 */
  float top_p;            /* 1: off; default 0.95 */
  float min_p;            /* 0: off; default 0.05 */
  float repeat_penalty;   /* 1: off (default) */
  int32_t repeat_last_n;  /* tokens the penalty looks back on; default 64 */
  float frequency_penalty;  /* OpenAI's, -2..2: each token's logit minus frequency_penalty times the
                               times it was sampled since the prompt; 0: off (default) */
  float presence_penalty;   /* OpenAI's, -2..2: minus presence_penalty once it was sampled; 0: off */
} kiln_sampling_params;

KILN_API kiln_sampling_params kiln_sampling_default_params(void);

typedef struct kiln_session_params {
  size_t size;            /* sizeof(kiln_session_params) */
  int32_t n_ctx;          /* positions the KV cache holds; 0: the model's maximum, at most 4096 */
  kiln_kv_type kv_type;
  int32_t priority;       /* under the budget, lower priorities are snapshotted first; default 0 */
  kiln_profiling profiling; /* KILN_PROFILE_OFF (default), _BASIC or _DETAILED */
  int32_t check_numerics;   /* non-zero: each instruction's outputs are scanned, and the first NaN or
                               infinity ends the call with KILN_E_INTERNAL naming the op, its layer,
                               the token position and the ranges of the op's inputs */
  kiln_sampling_params sampling; /* its own `size` says which of its fields the caller knows */
} kiln_session_params;

KILN_API kiln_session_params kiln_session_default_params(void);
KILN_API kiln_status kiln_session_create(kiln_model* model, const kiln_session_params* params, kiln_session** out);
KILN_API void kiln_session_free(kiln_session* session);

/* Prefill progress: called on the calling thread after each prefill step (a chunk of up to 128
 * tokens) with the prompt tokens decoded so far and their total, both counting only what this call
 * decodes (the prefix reused from the KV cache is not counted): `done` grows strictly, the last call
 * has done == total. Return non-zero to stop the call as kiln_session_cancel does:
 * KILN_E_CANCELLED, stop_reason KILN_STOP_CANCELLED, the KV cache as it was before the call. */
typedef int (*kiln_prefill_fn)(void* user_data, int32_t done, int32_t total);

typedef struct kiln_generate_params {
  size_t size;               /* sizeof(kiln_generate_params) */
  int32_t max_tokens;        /* new tokens at most; default 256 */
  const char* const* stop;   /* stop strings (not emitted); NULL: none */
  size_t n_stop;
  int32_t add_bos;           /* kiln_session_generate: -1 the model's rule (default), 0 no, 1 yes */
  int32_t parse_special;     /* kiln_session_generate: non-zero reads special tokens' text as tokens */
  kiln_prefill_fn on_prefill;  /* NULL (default): none. See kiln_prefill_fn */
  void* prefill_user_data;     /* passed to on_prefill */
  struct kiln_job_done* on_done; /* the _async calls: see kiln_job_done; NULL (default): none */
  /* Constrained output: the reply is text the grammar allows, a stop token only where it may end.
   * At most one of the two; a grammar that does not parse is KILN_E_INVALID_ARGUMENT with the line
   * and column (or the schema keyword) in kiln_last_error(). NULL (default): none. */
  const char* grammar;         /* GBNF text, llama.cpp's grammar format (root ::= ...) */
  const char* json_schema;     /* a JSON Schema's text: the reply is JSON valid against it */
  /* Speculative decoding (default off): drafted tokens are verified by the model in one step; at
   * temperature 0 the text is the text without, when sampling the distribution is the model's.
   * draft_model: a smaller model of the same vocabulary (loaded on the session's runtime; another
   * vocabulary is KILN_E_INVALID_ARGUMENT naming the first token that differs); the session keeps
   * a session of it. lookup_ngram: without a draft model, prompt lookup drafts what followed the
   * last N tokens earlier in the text (3 is a good N; 0: off). draft_max: the most tokens drafted
   * per step (the count adapts to the acceptance below it); 0: 8. */
  kiln_model* draft_model;
  int32_t lookup_ngram;
  int32_t draft_max;
  /* With `grammar`: a lazy grammar (llama.cpp's). The reply is free until this text appears in it;
   * from its first byte on, the reply follows the grammar, which must start with it (a tool call in
   * a free reply: "<tool_call>" with kiln_tool_call_grammar's grammar). NULL (default): the grammar
   * holds from the reply's start. */
  const char* grammar_trigger;
} kiln_generate_params;

KILN_API kiln_generate_params kiln_generate_default_params(void);

typedef enum kiln_stop_reason {
  KILN_STOP_LENGTH = 0,   /* max_tokens generated */
  KILN_STOP_EOS,          /* the model ended its reply */
  KILN_STOP_STRING,       /* a stop string */
  KILN_STOP_CONTEXT_FULL, /* the session's context is full */
  KILN_STOP_CANCELLED,    /* kiln_session_cancel() */
  KILN_STOP_CALLBACK      /* the token callback returned non-zero */
} kiln_stop_reason;

struct kiln_generate_result;
/* An _async call's end: `fn` runs once on the job's thread after the last token callback, with the
 * call's status, its result and, on failure, what failed (valid during the call only). The struct
 * must live until `fn` is called; `fn` may free it (kiln reads nothing of it afterwards).
 * kiln_job_wait and kiln_job_result may be used instead, or as well. */
typedef struct kiln_job_done {
  void (*fn)(void* user_data, kiln_status status, const struct kiln_generate_result* result, const char* error);
  void* user_data;
} kiln_job_done;

typedef struct kiln_generate_result {
  size_t size;                /* sizeof(kiln_generate_result) */
  kiln_stop_reason stop_reason;
  int32_t prompt_tokens;      /* the whole prompt */
  int32_t reused_tokens;      /* of them, already in the KV cache from the previous call */
  int32_t generated_tokens;
  double time_to_first_token_ms;
  double prefill_tokens_per_second;
  double decode_tokens_per_second;
  /* Speculative decoding: tokens drafted, of them accepted, and the model's steps after the prompt
   * (one per token without speculation, one per verification with it). */
  int32_t drafted_tokens;
  int32_t accepted_tokens;
  int32_t target_steps;
} kiln_generate_result;

/* Receives the reply as it is produced: `text` holds whole UTF-8 characters only (never a split
 * sequence; not NUL-terminated), `ids` the tokens sampled since the previous call. Runs on the
 * generating thread. Return non-zero to stop (KILN_STOP_CALLBACK). */
typedef int (*kiln_token_fn)(void* user_data, const char* text, size_t len, const int32_t* ids, size_t n_ids);

/* Continues the session with `prompt` (UTF-8, NUL-terminated). Each call takes the whole text the
 * model should see: what the KV cache holds from the previous call is reused where the new prompt
 * starts with it, so a growing transcript decodes only what is new. `on_token` and `out` may be
 * NULL. Returns KILN_E_CANCELLED when cancelled (out is still filled and the session usable). */
KILN_API kiln_status kiln_session_generate(kiln_session* session, const char* prompt, const kiln_generate_params* params,
                                           kiln_token_fn on_token, void* user_data, kiln_generate_result* out);

typedef struct kiln_message {
  const char* role;    /* "system", "user", "assistant" */
  const char* content; /* UTF-8; encoded as plain text: a special token's text typed here is text */
} kiln_message;

/* The reply to a whole conversation, through the model's chat template (as an OpenAI-style request
 * sends it); the part the cache holds from earlier calls is reused. KILN_E_NOT_FOUND when the
 * model has no chat template. */
KILN_API kiln_status kiln_session_chat(kiln_session* session, const kiln_message* messages, size_t n_messages,
                                       const kiln_generate_params* params, kiln_token_fn on_token, void* user_data,
                                       kiln_generate_result* out);

/* kiln_session_chat with the conversation as an OpenAI chat request holds it, for tool calling:
 * `request_json` is a JSON object {"messages": [...], "tools": [...]} ("tools" optional, passed to
 * the template as apply_chat_template(tools=...) passes them). A message: "role" (system, user,
 * assistant, tool), "content" (a string; null or absent: empty), an assistant's "tool_calls"
 * ([{"id", "type": "function", "function": {"name", "arguments"}}]; arguments a JSON object or
 * its text, given to the template as an object, as Hugging Face's templates expect), a tool
 * message's "tool_call_id" and "name". A malformed request: KILN_E_INVALID_ARGUMENT naming it. */
KILN_API kiln_status kiln_session_chat_json(kiln_session* session, const char* request_json,
                                            const kiln_generate_params* params, kiln_token_fn on_token, void* user_data,
                                            kiln_generate_result* out);

/* kiln_session_generate and kiln_session_chat on one of the runtime's job threads: the call
 * returns at once with a job (`out`, not NULL) whose token callbacks run on that thread. The
 * runtime keeps its job threads and hands each call to an idle one (it adds one when none is
 * idle, up to 64; calls past that wait their turn), so no thread is started per call. The strings
 * and messages are copied before the call returns; `params` too (its on_done: see kiln_job_done).
 * Until the job ends the session may be given only to kiln_session_cancel, kiln_session_stats_get
 * and kiln_job_cancel. kiln_job_result waits and gives the result; free the job with kiln_job_free. */
KILN_API kiln_status kiln_session_generate_async(kiln_session* session, const char* prompt,
                                                 const kiln_generate_params* params, kiln_token_fn on_token,
                                                 void* user_data, kiln_job** out);
KILN_API kiln_status kiln_session_chat_async(kiln_session* session, const kiln_message* messages, size_t n_messages,
                                             const kiln_generate_params* params, kiln_token_fn on_token,
                                             void* user_data, kiln_job** out);
KILN_API kiln_status kiln_session_chat_json_async(kiln_session* session, const char* request_json,
                                                  const kiln_generate_params* params, kiln_token_fn on_token,
                                                  void* user_data, kiln_job** out);
/* Waits for the job, fills `out` (NULL: not filled) and returns the job's status, with its message
 * in kiln_last_error() on failure. A model load job has no result: `out` is left as it is. */
KILN_API kiln_status kiln_job_result(kiln_job* job, struct kiln_generate_result* out);

/* Stops the session's generation before its next step (a prefill chunk or a token). Any thread,
 * any time; a session that is not generating ignores it. */
KILN_API kiln_status kiln_session_cancel(kiln_session* session);
/* The sampling of the next calls (generate, chat, kiln_session_sample); the KV cache stays, so a
 * server can give each request its own sampling on a session that holds a shared prefix. NULL:
 * the defaults. */
KILN_API kiln_status kiln_session_set_sampling(kiln_session* session, const kiln_sampling_params* params);
/* Forgets the conversation: the next call starts at position 0. */
KILN_API kiln_status kiln_session_reset(kiln_session* session);
/* The tokens and KV cache to `path` (written to a temporary file and renamed; checksummed; bound to
 * the model, n_ctx and kv_type). */
KILN_API kiln_status kiln_session_save(kiln_session* session, const char* path);
/* Reads a file kiln_session_save wrote for this model, n_ctx and kv_type; anything else, or a
 * truncated or damaged file, is refused and the session is unchanged. */
KILN_API kiln_status kiln_session_restore(kiln_session* session, const char* path);

/* ---- token level ------------------------------------------------------------------------- */

/* Appends `ids` to the session at its position (n_past) and computes the logits of the last one:
 * several ids run as prefill steps, one id as a decode step that sessions of the same model
 * decoding at the same time share. An id outside the vocabulary, or more ids than the context has
 * room for, is refused with nothing decoded. A session that decodes one id at a time counts as
 * decoding (its steps are waited for, briefly, by the other sessions' steps) until it decodes
 * several at once, generates, chats, is reset or freed. Cancellable (KILN_E_CANCELLED: the session
 * as before the call). */
KILN_API kiln_status kiln_session_decode(kiln_session* session, const int32_t* ids, size_t n_ids);
/* The last kiln_session_decode's logits, `n` floats: the vocabulary's size (kiln_model_info's
 * vocab_size; fewer is KILN_E_BUFFER_TOO_SMALL). Before any decode, or after a generate, chat,
 * truncate or reset: KILN_E_INVALID_ARGUMENT. */
KILN_API kiln_status kiln_session_logits(kiln_session* session, float* out, size_t n);
/* The tokens the KV cache holds: the next decode's position. */
KILN_API kiln_status kiln_session_n_past(const kiln_session* session, int32_t* out);
/* Drops the positions from n_keep on (0 <= n_keep <= n_past): the next decode continues there and,
 * given the same ids, computes the same logits bit for bit. */
KILN_API kiln_status kiln_session_truncate(kiln_session* session, int32_t n_keep);
/* A token from the last decode's logits with the session's sampling (kiln_session_set_sampling):
 * the repetition penalty looks back on what the cache holds, the frequency and presence penalties
 * count the tokens this call sampled and the caller then decoded, as for kiln_session_generate.
 * The token is not decoded: pass it to kiln_session_decode (or not). */
KILN_API kiln_status kiln_session_sample(kiln_session* session, int32_t* out_id);

typedef struct kiln_session_stats {
  size_t size;              /* sizeof(kiln_session_stats) */
  int32_t n_ctx;
  int32_t position;         /* tokens the KV cache holds, live: during a call it grows as each prefill
                               chunk and each token is decoded */
  uint64_t reserved_bytes;  /* KV cache, arena and scratch; 0 while snapshotted */
  int32_t generating;       /* non-zero during a generate or chat call */
  int32_t evicted;          /* non-zero while the KV cache is in a snapshot file */
} kiln_session_stats;
KILN_API kiln_status kiln_session_stats_get(kiln_session* session, kiln_session_stats* out);
/* The profile of the session's last generate or chat call, as one JSON object (UTF-8): level,
 * time_to_first_token_s, prefill and decode (steps, tokens, seconds, tokens_per_second; at
 * KILN_PROFILE_DETAILED also bytes moved and tables by_op, by_kind, by_backend, by_layer,
 * by_instruction), memory (peak RSS and its parts), numerics_fault when check_numerics stopped it.
 * Written as kiln_detokenize writes: `len` gets the bytes needed, nothing is written when they do
 * not fit `capacity` (KILN_E_BUFFER_TOO_SMALL), a NUL follows when there is room. A session made
 * with KILN_PROFILE_OFF, or before its first call: KILN_E_INVALID_ARGUMENT. */
KILN_API kiln_status kiln_session_profile_json(kiln_session* session, char* buf, size_t capacity, size_t* len);

#ifdef __cplusplus
}
#endif

#endif /* KILN_H */
