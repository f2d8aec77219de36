/*
 * remote-cubin verify DIR
 *
 * Rehashes every image the index lists and compares with its name; reports
 * missing files, wrong sizes, corrupted contents, malformed index lines, and
 * (as a note) images in DIR that the index does not list. Exit status 1 when
 * anything listed is missing or corrupted.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cubin_store.h"
#include "tool.h"
#include "rg_opt.h"

static int check_entry(const char *dir, const cubin_store_rec *r);
static int cmp_hash(const void *a, const void *b);
static void note_unindexed(const char *dir, const cubin_store_index *ix);

/* 0 when the entry is intact; prints why not otherwise. */
static int check_entry(const char *dir, const cubin_store_rec *r)
{
	char path[4096], hash[CUBIN_HASH_HEX];
	struct stat st;
	void *m;
	int fd;

	cubin_store_path(dir, r->hash, path, sizeof(path));
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(fd, &st) != 0) {
		printf("missing  %s (%s)\n", r->hash, strerror(errno));
		if (fd >= 0)
			close(fd);
		return 1;
	}
	if ((uint64_t)st.st_size != r->size) {
		printf("corrupt  %s: size %lld, index says %llu\n", r->hash, (long long)st.st_size,
		       (unsigned long long)r->size);
		close(fd);
		return 1;
	}
	if (st.st_size == 0) {
		cubin_hash("", 0, hash);
	} else {
		m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (m == MAP_FAILED) {
			printf("missing  %s (mmap: %s)\n", r->hash, strerror(errno));
			close(fd);
			return 1;
		}
		cubin_hash(m, (size_t)st.st_size, hash);
		munmap(m, (size_t)st.st_size);
	}
	close(fd);
	if (strcmp(hash, r->hash) != 0) {
		printf("corrupt  %s: contents hash to %s\n", r->hash, hash);
		return 1;
	}
	return 0;
}

static int cmp_hash(const void *a, const void *b)
{
	return strcmp(((const cubin_store_rec *)a)->hash, ((const cubin_store_rec *)b)->hash);
}

static void note_unindexed(const char *dir, const cubin_store_index *ix)
{
	cubin_store_rec *sorted = NULL;
	struct dirent *de;
	DIR *d;

	if (ix->n && !(sorted = malloc(ix->n * sizeof(*sorted))))
		return;
	if (ix->n) {
		memcpy(sorted, ix->r, ix->n * sizeof(*sorted));
		qsort(sorted, ix->n, sizeof(*sorted), cmp_hash);
	}
	if (!(d = opendir(dir))) {
		free(sorted);
		return;
	}
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		cubin_store_rec key;
		if (len != CUBIN_HASH_LEN + 7 || strcmp(de->d_name + CUBIN_HASH_LEN, ".fatbin") != 0)
			continue;
		memcpy(key.hash, de->d_name, CUBIN_HASH_LEN);
		key.hash[CUBIN_HASH_LEN] = '\0';
		if (!ix->n || !bsearch(&key, sorted, ix->n, sizeof(*sorted), cmp_hash))
			printf("note     %s not in the index\n", de->d_name);
	}
	closedir(d);
	free(sorted);
}

int cmd_verify(int argc, char **argv)
{
	cubin_store_index ix;
	size_t bad = 0, nbroken = 0;
	struct stat st;
	const char *dir;
	int rc;

	static const struct option longopts[] = {{NULL, 0, NULL, 0}};
	optind = 1;
	if (rg_opt_next(argc, argv, ":", longopts, "remote-cubin") != -1)
		return RG_EXIT_USAGE;
	if (argc - optind != 1)
		return rg_opt_error("remote-cubin", "usage: remote-cubin verify DIR");
	dir = argv[optind];
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		tool_error(dir, "not a directory");
		return 1;
	}
	if ((rc = cubin_store_check(dir)) != CUBIN_OK || (rc = cubin_store_index_read(dir, &ix, &bad)) != CUBIN_OK) {
		tool_error(dir, "cannot read index: %s", cubin_strerror(rc));
		return 1;
	}
	for (size_t i = 0; i < ix.n; i++)
		nbroken += check_entry(dir, &ix.r[i]);
	note_unindexed(dir, &ix);
	if (bad)
		printf("index    %zu malformed lines\n", bad);
	printf("%s: %zu entries, %zu ok, %zu missing or corrupt\n", dir, ix.n, ix.n - nbroken, nbroken);
	cubin_store_index_free(&ix);
	fflush(stdout);
	return nbroken || bad ? 1 : 0;
}
