/*
 * The one logging path of every component. Levels per module from REMOTE_GPU_LOG
 * ("warn" or "warn,transport=debug"), output to stderr or REMOTE_GPU_LOG_FILE
 * (the string "%p" in it is replaced by the pid: one file per process).
 */
#ifndef RG_LOG_H
#define RG_LOG_H

#include <stdarg.h>

enum rg_log_level { RG_LOG_ERROR, RG_LOG_WARN, RG_LOG_INFO, RG_LOG_DEBUG, RG_LOG_TRACE };

/* Reads the environment once; safe to call again. prog prefixes each line. */
void rg_log_init(const char *prog);
int rg_log_enabled(int level, const char *module);
void rg_log_write(int level, const char *module, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
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
