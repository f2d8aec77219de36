/*
 * Input files: mapped read-only (libcublasLt is half a gigabyte; nothing is
 * copied), classified by their first bytes, and walked image by image.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cubin_int.h"
#include "tool.h"

typedef struct each_ctx {
	const input *in;
	image_fn fn;
	void *ctx;
} each_ctx;

static int each_fatbin(void *vctx, const void *fatbin, size_t size);

int input_open(input *in, const char *path)
{
	struct stat st;
	cubin_elf e;
	void *m;
	int fd;

	memset(in, 0, sizeof(*in));
	in->path = path;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(fd, &st) != 0) {
		tool_error(path, "%s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		tool_error(path, "not a regular file");
		close(fd);
		return -1;
	}
	if (st.st_size == 0) {
		tool_error(path, "empty file");
		close(fd);
		return -1;
	}
	m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED) {
		tool_error(path, "mmap: %s", strerror(errno));
		return -1;
	}
	in->data = m;
	in->size = (size_t)st.st_size;

	if (in->size >= 4 && memcmp(in->data, "\x7f" "ELF", 4) == 0) {
		int rc = cubin__elf_open(&e, in->data, in->size);
		if (rc != CUBIN_OK) {
			tool_error(path, "ELF: %s", rc == CUBIN_ENOTFOUND ? "no section headers" : cubin_strerror(rc));
			input_close(in);
			return -1;
		}
		in->kind = e.machine == CUBIN_EM_CUDA ? INPUT_CUBIN : INPUT_HOST_ELF;
	} else if (in->size >= 4 && cubin__le32(in->data) == CUBIN_FATBIN_MAGIC) {
		in->kind = INPUT_FATBIN;
	} else {
		tool_error(path, "not an ELF file, fatbin or cubin");
		input_close(in);
		return -1;
	}
	return 0;
}

void input_close(input *in)
{
	if (in->data)
		munmap((void *)in->data, in->size);
	in->data = NULL;
}

static int each_fatbin(void *vctx, const void *fatbin, size_t size)
{
	each_ctx *c = vctx;
	image img = { fatbin, size, (size_t)((const uint8_t *)fatbin - c->in->data), 0 };
	return c->fn(c->ctx, c->in, &img);
}

int input_each_image(const input *in, image_fn fn, void *ctx)
{
	each_ctx c = { in, fn, ctx };

	switch (in->kind) {
	case INPUT_HOST_ELF:
		return cubin_elf_each_fatbin(in->data, in->size, each_fatbin, &c);
	case INPUT_FATBIN:
		return cubin__fatbins_in(in->data, in->size, each_fatbin, &c);
	case INPUT_CUBIN: {
		image img = { in->data, in->size, 0, 1 };
		return fn(ctx, in, &img);
	}
	}
	return CUBIN_EFORMAT;
}

uint32_t image_cubin_arch(const image *img)
{
	cubin_elf e;
	if (cubin__elf_open(&e, img->data, img->size) != CUBIN_OK)
		return 0;
	return cubin__elf_arch(&e);
}
