/*
 * remote-cubin extract FILE... --store DIR [--quiet]
 *
 * Cuts each input into the images a program registers (the fatbins of
 * .nv_fatbin, a .fatbin file's fatbins, or a whole .cubin), checks each one's
 * structure, and stores it as DIR/<hash>.fatbin unless that entry is there
 * already with the same bytes (a damaged one is replaced). The index gets one line per new image after each input
 * file, so an interrupted run keeps what it stored.
 *
 * Progress goes to stderr for inputs of PROGRESS_MIN bytes or more: a line
 * rewritten in place on a terminal, a line per quarter otherwise.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cubin_int.h"
#include "cubin_store.h"
#include "tool.h"
#include "rg_opt.h"

#define PROGRESS_MIN (32u << 20)

typedef struct xctx {
	const char *store;
	const char *source;
	cubin_store_rec *recs;
	size_t n, cap;
	size_t nimages, nnew, nrepaired, nbad;
	uint64_t bytes;
	int progress; /* 0 off, 1 terminal, 2 lines */
	int last_step;
	double last_t;
} xctx;

static double now(void);
static void show_progress(xctx *x, const input *in, size_t pos, int done);
static int store_image(void *vctx, const input *in, const image *img);
static int extract_one(const char *store, const char *path, int quiet);

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void show_progress(xctx *x, const input *in, size_t pos, int done)
{
	int pct = in->size ? (int)(100.0 * pos / in->size) : 100;

	if (x->progress == 1) {
		double t = now();
		if (!done && t - x->last_t < 0.2)
			return;
		x->last_t = t;
		fprintf(stderr, "\r%s: %3d%%, %zu fatbins, %.1f MB", in->path, done ? 100 : pct,
			x->nimages, x->bytes / 1e6);
		if (done)
			fputc('\n', stderr);
	} else if (x->progress == 2 && !done && pct / 25 > x->last_step) {
		x->last_step = pct / 25;
		fprintf(stderr, "%s: %d%%, %zu fatbins, %.1f MB\n", in->path, pct, x->nimages, x->bytes / 1e6);
	}
}

static int store_image(void *vctx, const input *in, const image *img)
{
	xctx *x = vctx;
	char hash[CUBIN_HASH_HEX];
	int rc;

	/* Structure only: every entry's range, no decompression. A broken image is
	 * reported and skipped; the ones after it are still stored. */
	if (img->is_cubin) {
		cubin_kernels ks;
		rc = cubin_elf_kernels(img->data, img->size, &ks);
		if (rc == CUBIN_OK)
			cubin_kernels_free(&ks);
	} else {
		rc = cubin__fatbin_walk(img->data, img->size, NULL, NULL);
	}
	if (rc != CUBIN_OK) {
		tool_error(in->path, "%s at offset %#zx: %s; not stored", img->is_cubin ? "cubin" : "fatbin",
			   img->offset, cubin_strerror(rc));
		x->nbad++;
		return CUBIN_OK;
	}

	rc = cubin_store_put(x->store, img->data, img->size, hash);
	if (rc < 0) {
		tool_error(x->store, "cannot write store entry %s: %s", hash, cubin_strerror(rc));
		return rc;
	}
	x->nnew += rc == 1;
	x->nrepaired += rc == 2;
	x->nimages++;
	x->bytes += img->size;
	if (x->n == x->cap) {
		size_t ncap = x->cap ? x->cap * 2 : 64;
		cubin_store_rec *nr = realloc(x->recs, ncap * sizeof(*nr));
		if (!nr)
			return CUBIN_ENOMEM;
		x->recs = nr;
		x->cap = ncap;
	}
	memcpy(x->recs[x->n].hash, hash, CUBIN_HASH_HEX);
	x->recs[x->n].size = img->size;
	x->recs[x->n].source = (char *)x->source;
	x->n++;
	show_progress(x, in, img->offset + img->size, 0);
	return CUBIN_OK;
}

static int extract_one(const char *store, const char *path, int quiet)
{
	char real[PATH_MAX];
	xctx x = { .store = store };
	double t0 = now();
	input in;
	int rc, status = 0;

	if (input_open(&in, path) != 0)
		return 1;
	x.source = realpath(path, real) ? real : path;
	if (!quiet && in.size >= PROGRESS_MIN)
		x.progress = tool_isatty_stderr() ? 1 : 2;

	rc = input_each_image(&in, store_image, &x);
	if (x.progress)
		show_progress(&x, &in, in.size, 1);
	if (rc == CUBIN_ENOTFOUND && in.kind == INPUT_HOST_ELF) {
		if (!quiet)
			fprintf(stderr, "remote-cubin: %s: no .nv_fatbin section, nothing to extract\n", path);
	} else if (rc != CUBIN_OK) {
		if (rc != CUBIN_EIO) /* store errors were reported where they happened */
			tool_error(path, "%s (after %zu fatbins)", cubin_strerror(rc), x.nimages);
		status = 1;
	}
	if (x.nbad)
		status = 1;
	if (x.n) {
		int irc = cubin_store_index_add(store, x.recs, x.n);
		if (irc != CUBIN_OK) {
			tool_error(store, "cannot update index: %s", cubin_strerror(irc));
			status = 1;
		}
	}
	if (!quiet)
		printf("%s: %zu %s, %.1f MB: %zu new, %zu already stored, %zu damaged entries replaced%s%s (%.2f s)\n",
		       path, x.nimages, in.kind == INPUT_CUBIN ? "cubin" : "fatbins", x.bytes / 1e6, x.nnew,
		       x.nimages - x.nnew - x.nrepaired, x.nrepaired, x.nbad ? ", broken ones skipped" : "",
		       status ? ", ERRORS" : "", now() - t0);
	free(x.recs);
	input_close(&in);
	return status;
}

int cmd_extract(int argc, char **argv)
{
	const char *store = NULL;
	int quiet = 0, nfiles = 0, status = 0;

	static const struct option longopts[] = {
		{"store", required_argument, NULL, 's'}, {"quiet", no_argument, NULL, 'q'}, {NULL, 0, NULL, 0}};
	int c;
	optind = 1;
	while ((c = rg_opt_next(argc, argv, ":s:q", longopts, "remote-cubin")) != -1) {
		if (c == 's')
			store = optarg;
		else if (c == 'q')
			quiet = 1;
		else
			return RG_EXIT_USAGE;
	}
	nfiles = argc - optind;
	if (!store || !nfiles)
		return rg_opt_error("remote-cubin", "usage: remote-cubin extract FILE... --store DIR");
	int irc = cubin_store_init(store);
	if (irc != CUBIN_OK) {
		tool_error(store, "%s", irc == CUBIN_ESTOREFMT ? cubin_strerror(irc)
							: "cannot create or open the store directory");
		return 1;
	}
	for (int i = optind; i < argc; i++)
		status |= extract_one(store, argv[i], quiet);
	fflush(stdout);
	return status;
}
