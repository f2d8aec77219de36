/*
 * Messages for the CUBIN_E* codes: what the user of remote-cubin reads after the
 * file name, so they say what is wrong with the input, not where in the code.
 */
#include "cubin.h"

const char *cubin_strerror(int err)
{
	switch (err) {
	case CUBIN_OK: return "success";
	case CUBIN_EFORMAT: return "not a valid ELF, fatbin or cubin (bad magic or field)";
	case CUBIN_ETRUNC: return "truncated: an offset or size runs past the end of the data";
	case CUBIN_ECOMPRESS: return "a compressed entry could not be decoded";
	case CUBIN_ENOMEM: return "out of memory";
	case CUBIN_EIO: return "input/output error";
	case CUBIN_ENOTFOUND: return "not found";
	case CUBIN_ESTOREFMT:
		return "a store of an older format (XXH3-128 addresses, or no FORMAT file): "
		       "remove it, or extract into a new directory";
	default: return "unknown error";
	}
}
