/*
 * The one logging path of every component. Levels per module from REMOTE_GPU_LOG
 * ("warn" or "warn,transport=debug"), output to stderr or REMOTE_GPU_LOG_FILE
 * (the string "%p" in it is replaced by the pid: one file per process).
 *
 * REMOTE_GPU_LOG_SYNC=1 keeps the log in order with the program's own output on
 * stderr: every line is written through stdio's stderr (unbuffered) right after
 * an fflush(stdout), so what the program printf'ed before its CUDA call comes
 * before the lines that call logs, even when stdout is a file or a pipe (fully
 * buffered). It costs a flush per log line. It has no effect with
 * REMOTE_GPU_LOG_FILE (the log is then a file of its own). Interpreters with
 * their own buffers (Python's sys.stdout) must also run unbuffered (python -u).
 * Whatever the mode, a line (or a block) is written whole under one lock.
 */
#ifndef RG_LOG_H
#define RG_LOG_H

#include <stdarg.h>
#include <stddef.h>

enum rg_log_level { RG_LOG_ERROR, RG_LOG_WARN, RG_LOG_INFO, RG_LOG_DEBUG, RG_LOG_TRACE };

/* Reads the environment once; safe to call again. prog prefixes each line. */
void rg_log_init(const char *prog);
int rg_log_enabled(int level, const char *module);
void rg_log_write(int level, const char *module, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Writes text (one or more whole lines, each ending in '\n') to the log output
 * as one block, whatever REMOTE_GPU_LOG says: for reports the user asked for
 * (REMOTE_GPU_STATS, REMOTE_GPU_TRACE). */
void rg_log_block(const char *text, size_t len);
/* The prefix rg_log_write puts before a line ("[prog pid time level module] "),
 * for callers that build blocks; returns its length (truncated to cap - 1). */
int rg_log_prefix(char *buf, size_t cap, int level, const char *module);
/* Logs "name" once per process at warn level: for unimplemented functions. */
void rg_log_once(const char *module, const char *what, const char *name);

#define rg_log(level, module, ...)                           \
	do {                                                 \
		if (rg_log_enabled(level, module))           \
			rg_log_write(level, module, __VA_ARGS__); \
	} while (0)
#define LOG_ERROR(m, ...) rg_log(RG_LOG_ERROR, m, __VA_ARGS__)
#define LOG_WARN(m, ...) rg_log(RG_LOG_WARN, m, __VA_ARGS__)
#define LOG_INFO(m, ...) rg_log(RG_LOG_INFO, m, __VA_ARGS__)
#define LOG_DEBUG(m, ...) rg_log(RG_LOG_DEBUG, m, __VA_ARGS__)

#endif
