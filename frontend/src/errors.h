#ifndef FE_ERRORS_H
#define FE_ERRORS_H
#include <stddef.h>
struct fe_error_text {
	int code;
	const char *name, *text;
};
extern const struct fe_error_text fe_error_texts[];
extern const size_t fe_error_texts_n;
#endif
