/*
 * CUDA_VISIBLE_DEVICES on top of the remote devices: which of the devices that
 * REMOTE_GPU brought (in its order) the program sees, and in which order, read
 * as CUDA reads it locally: a comma-separated list of ordinals of that list or
 * of UUIDs ("GPU-" and a prefix of the hex digits that names one device, dashes
 * ignored). The list ends at the first entry that names no device (or one it
 * already named): "0,9,1" is device 0 alone. Unset: every device.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "rg_log.h"
#include "rt.h"

/* The device a "GPU-..." entry names: -1 if none or several. */
static int by_uuid(const fe_device *devs, int n, const char *s)
{
	char want[33];
	size_t w = 0;
	for (s += 4; *s && w < 32; s++)
		if (*s != '-') {
			if (!isxdigit((unsigned char)*s))
				return -1;
			want[w++] = (char)tolower((unsigned char)*s);
		}
	if (w == 0 || *s)
		return -1;
	int found = -1;
	for (int i = 0; i < n; i++) {
		char hex[33];
		for (int k = 0; k < 16; k++) {
			static const char digits[] = "0123456789abcdef";
			hex[2 * k] = digits[devs[i].uuid[k] >> 4];
			hex[2 * k + 1] = digits[devs[i].uuid[k] & 15];
		}
		if (memcmp(hex, want, w) == 0) {
			if (found >= 0)
				return -1;
			found = i;
		}
	}
	return found;
}

/* The device one entry names: -1 if none. */
static int entry_device(const fe_device *devs, int n, char *tok)
{
	while (isspace((unsigned char)*tok))
		tok++;
	char *end = tok + strlen(tok);
	while (end > tok && isspace((unsigned char)end[-1]))
		*--end = 0;
	if (strncasecmp(tok, "GPU-", 4) == 0)
		return by_uuid(devs, n, tok);
	char *stop;
	long v = strtol(tok, &stop, 10);
	if (stop == tok || *stop || v < 0 || v >= n)
		return -1;
	return (int)v;
}

int fe_visible_select(const fe_device *devs, int n, int *map)
{
	const char *env = getenv("CUDA_VISIBLE_DEVICES");
	if (!env) {
		for (int i = 0; i < n; i++)
			map[i] = i;
		return n;
	}
	char *buf = strdup(env);
	if (!buf)
		return 0;
	int k = 0;
	uint32_t seen = 0;
	/* strsep, not strtok: an empty entry ("0,,1") ends the list too */
	for (char *tok, *rest = buf; k < n && (tok = strsep(&rest, ",")) != NULL;) {
		int i = entry_device(devs, n, tok);
		if (i < 0 || (seen >> i & 1)) {
			LOG_INFO("frontend", "CUDA_VISIBLE_DEVICES: '%s' names no other of the %d remote devices: the list ends there",
				 tok, n);
			break;
		}
		seen |= 1u << i;
		map[k++] = i;
	}
	free(buf);
	LOG_INFO("frontend", "CUDA_VISIBLE_DEVICES=%s: %d of the %d remote devices visible", env, k, n);
	return k;
}
