/*
 * The cubin store on disk (layout and guarantees in cubin_store.h).
 *
 * Atomic writes: a temporary file is made in DIR itself (so rename() never
 * crosses a filesystem), filled, and renamed over the final name. Two writers of
 * the same image write the same bytes, so whichever rename lands last is right.
 * The index is different: two writers adding different lines must not lose each
 * other's, so its read-merge-rename runs under an exclusive flock() on a lock
 * file that is never renamed (a lock on the index itself would be lost with the
 * inode that rename replaces).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cubin_store.h"

#define INDEX_NAME "index"
#define LOCK_NAME "index.lock"
#define FORMAT_NAME "FORMAT"
/* The first line of DIR/FORMAT. Stores from before it named images by XXH3-128
 * (32 hex digits) and had no FORMAT file: such a store is refused, never read
 * with the new addresses (its names would simply never match, and a reader
 * could not tell a stale store from an empty one). */
#define FORMAT_LINE "remote-gpu cubin store 2 sha256\n"

typedef struct hkey {
	char h[CUBIN_HASH_HEX];
} hkey;

static int write_all(int fd, const void *data, size_t size);
static int tmp_open(const char *dir, char *path, size_t len);
static int same_contents(const char *path, const void *data, size_t size);
static int valid_hash(const char *s);
static int has_store_files(const char *dir);
static int check_format(const char *dir, int write);
static int cmp_key(const void *a, const void *b);
static int put_rec(cubin_store_index *ix, size_t *cap, const char *hash, uint64_t size, const char *src);

static int write_all(int fd, const void *data, size_t size)
{
	const char *p = data;
	while (size) {
		ssize_t w = write(fd, p, size);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return CUBIN_EIO;
		}
		p += w;
		size -= (size_t)w;
	}
	return CUBIN_OK;
}

/* A new, empty temporary file in dir; its name goes to path. */
static int tmp_open(const char *dir, char *path, size_t len)
{
	int fd;
	if ((size_t)snprintf(path, len, "%s/.tmp-XXXXXX", dir) >= len)
		return -1;
	fd = mkostemp(path, O_CLOEXEC);
	if (fd >= 0)
		(void)fchmod(fd, 0644);
	return fd;
}

/* 1 when the file at path holds exactly these bytes. */
static int same_contents(const char *path, const void *data, size_t size)
{
	struct stat st;
	int fd, same = 0;
	void *m;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == size) {
		if (size == 0) {
			same = 1;
		} else if ((m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0)) != MAP_FAILED) {
			same = memcmp(m, data, size) == 0;
			munmap(m, size);
		}
	}
	close(fd);
	return same;
}

static int valid_hash(const char *s)
{
	return cubin_hash_valid(s, CUBIN_HASH_LEN);
}

/* 1 when dir holds anything a store writes (an old store without FORMAT). */
static int has_store_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int found = 0;

	if (!d)
		return 0;
	while (!found && (de = readdir(d))) {
		size_t len = strlen(de->d_name);
		found = !strcmp(de->d_name, INDEX_NAME) ||
			(len > 7 && !strcmp(de->d_name + len - 7, ".fatbin"));
	}
	closedir(d);
	return found;
}

/* Checks DIR/FORMAT; when write, writes it into a store that is new (empty
 * of images). */
static int check_format(const char *dir, int write)
{
	char path[4096], tmp[4096], line[128] = "";
	FILE *f;
	int fd, rc;

	if ((size_t)snprintf(path, sizeof(path), "%s/" FORMAT_NAME, dir) >= sizeof(path))
		return CUBIN_ENOMEM;
	if ((f = fopen(path, "re"))) {
		int ok = fgets(line, sizeof(line), f) && !strcmp(line, FORMAT_LINE);
		fclose(f);
		return ok ? CUBIN_OK : CUBIN_ESTOREFMT;
	}
	if (errno != ENOENT)
		return CUBIN_EIO;
	if (has_store_files(dir))
		return CUBIN_ESTOREFMT;
	if (!write)
		return CUBIN_OK;
	if ((fd = tmp_open(dir, tmp, sizeof(tmp))) < 0)
		return CUBIN_EIO;
	rc = write_all(fd, FORMAT_LINE, strlen(FORMAT_LINE));
	if (close(fd) != 0 && rc == CUBIN_OK)
		rc = CUBIN_EIO;
	if (rc == CUBIN_OK && rename(tmp, path) != 0)
		rc = CUBIN_EIO;
	if (rc != CUBIN_OK)
		unlink(tmp);
	return rc;
}

int cubin_store_init(const char *dir)
{
	struct stat st;
	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		return CUBIN_EIO;
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
		return CUBIN_EIO;
	return check_format(dir, 1);
}

int cubin_store_check(const char *dir)
{
	return check_format(dir, 0);
}

int cubin_store_path(const char *dir, const char *hash, char *buf, size_t len)
{
	if ((size_t)snprintf(buf, len, "%s/%.64s.fatbin", dir, hash) >= len)
		return CUBIN_ENOMEM;
	return CUBIN_OK;
}

int cubin_store_has(const char *dir, const char *hash, uint64_t size)
{
	char path[4096];
	struct stat st;
	if (cubin_store_path(dir, hash, path, sizeof(path)) != CUBIN_OK)
		return 0;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == size;
}

int cubin_store_put(const char *dir, const void *data, size_t size, char hash_out[CUBIN_HASH_HEX])
{
	char final[4096], tmp[4096];
	int fd, rc, existed;

	cubin_hash(data, size, hash_out);
	if (cubin_store_path(dir, hash_out, final, sizeof(final)) != CUBIN_OK)
		return CUBIN_ENOMEM;
	/* An entry of that name is trusted only if it holds these very bytes: a
	 * damaged one is replaced, which is how a rerun of extract repairs a store. */
	existed = access(final, F_OK) == 0;
	if (existed && same_contents(final, data, size))
		return 0;
	if ((fd = tmp_open(dir, tmp, sizeof(tmp))) < 0)
		return CUBIN_EIO;
	rc = write_all(fd, data, size);
	if (close(fd) != 0 && rc == CUBIN_OK)
		rc = CUBIN_EIO;
	if (rc == CUBIN_OK && rename(tmp, final) != 0)
		rc = CUBIN_EIO;
	if (rc != CUBIN_OK) {
		unlink(tmp);
		return rc;
	}
	return existed ? 2 : 1;
}

static int put_rec(cubin_store_index *ix, size_t *cap, const char *hash, uint64_t size, const char *src)
{
	cubin_store_rec *r;
	if (ix->n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 64;
		cubin_store_rec *nr = realloc(ix->r, ncap * sizeof(*nr));
		if (!nr)
			return CUBIN_ENOMEM;
		ix->r = nr;
		*cap = ncap;
	}
	r = &ix->r[ix->n];
	memcpy(r->hash, hash, CUBIN_HASH_LEN);
	r->hash[CUBIN_HASH_LEN] = '\0';
	r->size = size;
	if (!(r->source = strdup(src ? src : "")))
		return CUBIN_ENOMEM;
	ix->n++;
	return CUBIN_OK;
}

int cubin_store_index_read(const char *dir, cubin_store_index *out, size_t *bad)
{
	char path[4096], *line = NULL;
	size_t linecap = 0, cap = 0, nbad = 0;
	ssize_t len;
	FILE *f;
	int rc = CUBIN_OK;

	memset(out, 0, sizeof(*out));
	if (bad)
		*bad = 0;
	if ((size_t)snprintf(path, sizeof(path), "%s/" INDEX_NAME, dir) >= sizeof(path))
		return CUBIN_ENOMEM;
	if (!(f = fopen(path, "re")))
		return errno == ENOENT ? CUBIN_OK : CUBIN_EIO;
	while ((len = getline(&line, &linecap, f)) >= 0) {
		char *end;
		unsigned long long size;

		if (len > 0 && line[len - 1] == '\n')
			line[--len] = '\0';
		if (len == 0)
			continue;
		if (len < CUBIN_HASH_LEN + 2 || !valid_hash(line) || line[CUBIN_HASH_LEN] != ' ' ||
		    line[CUBIN_HASH_LEN + 1] < '0' || line[CUBIN_HASH_LEN + 1] > '9') {
			nbad++;
			continue;
		}
		errno = 0;
		size = strtoull(line + CUBIN_HASH_LEN + 1, &end, 10);
		if (errno || (*end != ' ' && *end != '\0')) {
			nbad++;
			continue;
		}
		if ((rc = put_rec(out, &cap, line, size, *end ? end + 1 : "")) != CUBIN_OK)
			break;
	}
	if (rc == CUBIN_OK && ferror(f))
		rc = CUBIN_EIO;
	free(line);
	fclose(f);
	if (rc != CUBIN_OK)
		cubin_store_index_free(out);
	if (bad)
		*bad = nbad;
	return rc;
}

static int cmp_key(const void *a, const void *b)
{
	return strcmp(((const hkey *)a)->h, ((const hkey *)b)->h);
}

int cubin_store_index_add(const char *dir, const cubin_store_rec *recs, size_t n)
{
	char lpath[4096], ipath[4096], tmp[4096];
	cubin_store_index ix;
	hkey *known = NULL;
	size_t nknown, cap;
	int lfd, fd, rc;
	FILE *f;

	if ((size_t)snprintf(lpath, sizeof(lpath), "%s/" LOCK_NAME, dir) >= sizeof(lpath) ||
	    (size_t)snprintf(ipath, sizeof(ipath), "%s/" INDEX_NAME, dir) >= sizeof(ipath))
		return CUBIN_ENOMEM;
	if ((lfd = open(lpath, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0)
		return CUBIN_EIO;
	while (flock(lfd, LOCK_EX) != 0) {
		if (errno != EINTR) {
			close(lfd);
			return CUBIN_EIO;
		}
	}
	if ((rc = cubin_store_index_read(dir, &ix, NULL)) != CUBIN_OK)
		goto out_unlock;
	cap = ix.n;

	/* Hashes already listed, sorted for lookup; new records join the set.
	 * Copies, not pointers into ix.r, which put_rec may move. */
	nknown = ix.n;
	if (!(known = malloc((ix.n + n + 1) * sizeof(*known)))) {
		rc = CUBIN_ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < ix.n; i++)
		memcpy(known[i].h, ix.r[i].hash, CUBIN_HASH_HEX);
	qsort(known, nknown, sizeof(*known), cmp_key);
	for (size_t i = 0; i < n; i++) {
		hkey k;
		size_t j;

		memcpy(k.h, recs[i].hash, CUBIN_HASH_LEN);
		k.h[CUBIN_HASH_LEN] = '\0';
		if (!valid_hash(k.h) || bsearch(&k, known, nknown, sizeof(*known), cmp_key))
			continue;
		if ((rc = put_rec(&ix, &cap, k.h, recs[i].size, recs[i].source)) != CUBIN_OK)
			goto out;
		for (j = nknown++; j > 0 && strcmp(known[j - 1].h, k.h) > 0; j--)
			known[j] = known[j - 1];
		known[j] = k;
	}

	if ((fd = tmp_open(dir, tmp, sizeof(tmp))) < 0) {
		rc = CUBIN_EIO;
		goto out;
	}
	if (!(f = fdopen(fd, "w"))) {
		close(fd);
		unlink(tmp);
		rc = CUBIN_EIO;
		goto out;
	}
	for (size_t i = 0; i < ix.n; i++) {
		fprintf(f, "%s %llu ", ix.r[i].hash, (unsigned long long)ix.r[i].size);
		for (const char *s = ix.r[i].source; *s; s++)
			fputc(*s == '\n' || *s == '\r' ? '?' : *s, f);
		fputc('\n', f);
	}
	rc = CUBIN_OK;
	if (fflush(f) != 0 || fsync(fileno(f)) != 0)
		rc = CUBIN_EIO;
	if (fclose(f) != 0)
		rc = CUBIN_EIO;
	if (rc == CUBIN_OK && rename(tmp, ipath) != 0)
		rc = CUBIN_EIO;
	if (rc != CUBIN_OK)
		unlink(tmp);
out:
	free(known);
	cubin_store_index_free(&ix);
out_unlock:
	flock(lfd, LOCK_UN);
	close(lfd);
	return rc;
}

void cubin_store_index_free(cubin_store_index *ix)
{
	if (!ix)
		return;
	for (size_t i = 0; i < ix->n; i++)
		free(ix->r[i].source);
	free(ix->r);
	ix->r = NULL;
	ix->n = 0;
}
