/*
 * remote-cubin ls FILE|DIR [--json]
 *
 * For each image (fatbin or cubin) of a file, or each entry of a store: its hash
 * and size, its entries (kind, sm_XX, size, compressed), and for every cubin the
 * kernels with the (ordinal, offset, size) of each parameter: what a launch
 * needs to pack `void **args` into one buffer.
 *
 * Text, one kernel per line:  kernel_name  ordinal@offset:size ...
 * JSON: {"inputs":[{"path","images":[{"offset","size","hash","format",
 *        "source"?, "error"?, "entries":[{"kind","arch","size","compressed",
 *        "error"?, "kernels":[{"name","params":[{"ordinal","offset","size"}]}]}]}]}]}
 * A broken image or entry is reported (stderr, and "error" in JSON) and the
 * listing goes on; the exit status is then 1.
 */
#include <string.h>
#include <sys/stat.h>

#include "cubin_store.h"
#include "tool.h"
#include "rg_opt.h"

typedef struct lsctx {
	int json;
	int ninputs; /* inputs printed */
	int nimg;    /* images printed for the current input */
	int errors;
	const char *source; /* store listing: where the image came from */
} lsctx;

static const char *kind_name(int kind);
static void print_kernels(lsctx *c, const char *path, const uint8_t *elf, size_t size);
static int list_image(void *vctx, const input *in, const image *img);
static int ls_file(lsctx *c, const char *path);
static int ls_store(lsctx *c, const char *dir);

static const char *kind_name(int kind)
{
	return kind == CUBIN_ENTRY_ELF ? "elf" : kind == CUBIN_ENTRY_PTX ? "ptx" : "unknown";
}

static void print_kernels(lsctx *c, const char *path, const uint8_t *elf, size_t size)
{
	cubin_kernels ks;
	int rc = cubin_elf_kernels(elf, size, &ks);

	if (rc != CUBIN_OK) {
		tool_error(path, "cubin: %s", cubin_strerror(rc));
		c->errors++;
		if (c->json) {
			fputs(",\"error\":", stdout);
			json_str(stdout, cubin_strerror(rc));
		}
		return;
	}
	if (c->json)
		fputs(",\"kernels\":[", stdout);
	for (uint32_t i = 0; i < ks.n; i++) {
		const cubin_kernel *k = &ks.k[i];
		if (c->json) {
			fputs(i ? ",{\"name\":" : "{\"name\":", stdout);
			json_str(stdout, k->name);
			fputs(",\"params\":[", stdout);
			for (uint32_t j = 0; j < k->nparams; j++)
				printf("%s{\"ordinal\":%u,\"offset\":%u,\"size\":%u}", j ? "," : "",
				       k->params[j].ordinal, k->params[j].offset, k->params[j].size);
			fputs("]}", stdout);
		} else {
			printf("      %s", k->name);
			for (uint32_t j = 0; j < k->nparams; j++)
				printf(" %u@%u:%u", k->params[j].ordinal, k->params[j].offset, k->params[j].size);
			putchar('\n');
		}
	}
	if (c->json)
		putchar(']');
	cubin_kernels_free(&ks);
}

static int list_image(void *vctx, const input *in, const image *img)
{
	lsctx *c = vctx;
	char hash[CUBIN_HASH_HEX];
	cubin_fatbin fb = { 0 };
	int rc = CUBIN_OK;

	cubin_hash(img->data, img->size, hash);
	if (!img->is_cubin)
		rc = cubin_fatbin_parse(img->data, img->size, &fb);
	if (c->json) {
		printf("%s{\"offset\":%zu,\"size\":%zu,\"hash\":\"%s\",\"format\":\"%s\"", c->nimg ? "," : "",
		       img->offset, img->size, hash, img->is_cubin ? "cubin" : "fatbin");
		if (c->source) {
			fputs(",\"source\":", stdout);
			json_str(stdout, c->source);
		}
	} else {
		printf("%s %s @%#zx size %zu hash %s%s%s\n", in->path, img->is_cubin ? "cubin" : "fatbin",
		       img->offset, img->size, hash, c->source ? " from " : "", c->source ? c->source : "");
	}
	c->nimg++;
	if (rc != CUBIN_OK) {
		tool_error(in->path, "fatbin at offset %#zx: %s", img->offset, cubin_strerror(rc));
		c->errors++;
		if (c->json) {
			fputs(",\"error\":", stdout);
			json_str(stdout, cubin_strerror(rc));
			fputs(",\"entries\":[]}", stdout);
		}
		return CUBIN_OK;
	}

	if (c->json)
		fputs(",\"entries\":[", stdout);
	if (img->is_cubin) {
		uint32_t arch = image_cubin_arch(img);
		if (c->json)
			printf("{\"kind\":\"elf\",\"arch\":%u,\"size\":%zu,\"compressed\":false", arch, img->size);
		else
			printf("  sm_%u elf %zu bytes\n", arch, img->size);
		print_kernels(c, in->path, img->data, img->size);
		if (c->json)
			putchar('}');
	}
	for (uint32_t i = 0; i < fb.n; i++) {
		const cubin_entry *e = &fb.e[i];
		if (c->json)
			printf("%s{\"kind\":\"%s\",\"arch\":%u,\"size\":%zu,\"compressed\":%s", i ? "," : "",
			       kind_name(e->kind), e->arch, e->size, e->compressed ? "true" : "false");
		else
			printf("  %s_%u %s %zu bytes%s\n", e->kind == CUBIN_ENTRY_PTX ? "compute" : "sm", e->arch,
			       kind_name(e->kind), e->size, e->compressed ? " (compressed)" : "");
		if (e->kind == CUBIN_ENTRY_ELF)
			print_kernels(c, in->path, e->data, e->size);
		if (c->json)
			putchar('}');
	}
	if (c->json)
		fputs("]}", stdout);
	cubin_fatbin_free(&fb);
	return CUBIN_OK;
}

static int ls_file(lsctx *c, const char *path)
{
	input in;
	int rc;

	if (input_open(&in, path) != 0)
		return 1;
	if (c->json) {
		fputs(c->ninputs++ ? ",{\"path\":" : "{\"path\":", stdout);
		json_str(stdout, path);
		fputs(",\"images\":[", stdout);
	}
	c->nimg = 0;
	rc = input_each_image(&in, list_image, c);
	if (c->json)
		fputs("]}", stdout);
	input_close(&in);
	if (rc == CUBIN_ENOTFOUND && in.kind == INPUT_HOST_ELF) {
		if (!c->json)
			printf("%s: no .nv_fatbin section\n", path);
		return 0;
	}
	if (rc != CUBIN_OK) {
		tool_error(path, "%s", cubin_strerror(rc));
		return 1;
	}
	return 0;
}

static int ls_store(lsctx *c, const char *dir)
{
	cubin_store_index ix;
	size_t bad = 0;
	int status = 0, rc;

	if ((rc = cubin_store_check(dir)) != CUBIN_OK || (rc = cubin_store_index_read(dir, &ix, &bad)) != CUBIN_OK) {
		tool_error(dir, "cannot read index: %s", cubin_strerror(rc));
		return 1;
	}
	if (bad) {
		tool_error(dir, "index: %zu malformed lines ignored", bad);
		status = 1;
	}
	for (size_t i = 0; i < ix.n; i++) {
		char path[4096];
		cubin_store_path(dir, ix.r[i].hash, path, sizeof(path));
		c->source = ix.r[i].source;
		status |= ls_file(c, path);
	}
	c->source = NULL;
	cubin_store_index_free(&ix);
	return status;
}

int cmd_ls(int argc, char **argv)
{
	lsctx c = { 0 };
	const char *target = NULL;
	struct stat st;
	int status;

	static const struct option longopts[] = {{"json", no_argument, NULL, 'j'}, {NULL, 0, NULL, 0}};
	int o;
	optind = 1;
	while ((o = rg_opt_next(argc, argv, ":", longopts, "remote-cubin")) != -1) {
		if (o != 'j')
			return RG_EXIT_USAGE;
		c.json = 1;
	}
	if (argc - optind != 1)
		return rg_opt_error("remote-cubin", "usage: remote-cubin ls FILE|DIR [--json]");
	target = argv[optind];
	if (c.json)
		fputs("{\"inputs\":[", stdout);
	if (stat(target, &st) == 0 && S_ISDIR(st.st_mode))
		status = ls_store(&c, target);
	else
		status = ls_file(&c, target);
	if (c.json)
		fputs("]}\n", stdout);
	fflush(stdout);
	return status || c.errors ? 1 : 0;
}
