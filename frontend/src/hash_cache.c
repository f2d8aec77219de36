/*
 * The client's cache of image hashes. An image is named on the wire by its
 * SHA-256 (cubin_hash), which costs about 2 ms per MB here: all fatbins of
 * cuDNN take half a second, where XXH3 took a tenth of that. Most images lie in
 * the read-only part of a library file, and the same file always holds the same
 * images, so their hashes are kept per file, keyed by the file's identity
 * (device, inode, size, modification time in ns), in a folder of the user's own:
 *
 *   $REMOTE_GPU_HASH_CACHE, or $XDG_CACHE_HOME/remote-gpu, or ~/.cache/remote-gpu
 *   (mode 0700, owned by the user; anything else is not used; "0": no cache)
 *     v1-<dev>-<ino>-<size>-<sec>.<nsec>   lines "<file offset> <size> <hash>",
 *                                          appended; the last line of an
 *                                          offset wins
 *
 * The bytes hashed are those mapped in this process, and a library may have been
 * replaced on disk since it was mapped (an upgrade renames a new file over it):
 * the file named is used only when its device and inode are those of the
 * mapping (/proc/self/maps), so a hash is never filed under another file's
 * identity. A wrong entry can still only mislead this user's own programs; the
 * server refuses an upload that does not hash to its name, and the caller then
 * forgets the entry (fe_hashcache_forget) and hashes the bytes.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cubin.h"
#include "hash_cache.h"
#include "rg_log.h"

typedef struct hc_entry {
	uint64_t off, size;
	char hash[CUBIN_HASH_HEX];
} hc_entry;

/* One library file, as first looked at. */
typedef struct hc_file {
	char name[PATH_MAX];  /* as the dynamic linker names it */
	char cache[PATH_MAX]; /* its cache file; "" when it has none */
	hc_entry *e;
	size_t n, cap;
	struct hc_file *next;
} hc_file;

/* Where an image lies: its library and its offset in the file. */
typedef struct hc_where {
	const void *data;
	size_t size;
	const char *name;
	uint64_t off;
	int found, writable;
} hc_where;

static int find_segment(struct dl_phdr_info *info, size_t sz, void *arg);
static int cache_dir(char *out, size_t len);
static int mapped_file(const void *addr, dev_t *dev, ino_t *ino);
static hc_file *file_open(const char *name, const void *addr);
static void file_load(hc_file *f);
static hc_entry *entry_find(hc_file *f, uint64_t off, size_t size);
static int entry_put(hc_file *f, uint64_t off, size_t size, const char *hash);
static hc_file *where_is(const void *data, size_t size, uint64_t *off);

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static hc_file *files;

static int find_segment(struct dl_phdr_info *info, size_t sz, void *arg)
{
	hc_where *w = arg;
	uintptr_t p = (uintptr_t)w->data;
	(void)sz;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t start = info->dlpi_addr + ph->p_vaddr;
		/* Bytes in the file only: p_filesz, not the zero-filled rest. */
		if (ph->p_type != PT_LOAD || p < start || p - start >= ph->p_filesz || w->size > ph->p_filesz - (p - start))
			continue;
		w->name = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : "/proc/self/exe";
		w->off = ph->p_offset + (p - start);
		w->writable = (ph->p_flags & PF_W) != 0;
		w->found = 1;
		return 1;
	}
	return 0;
}

/* The cache folder, created 0700 if missing; -1 when there is none to use. */
static int cache_dir(char *out, size_t len)
{
	const char *env = getenv("REMOTE_GPU_HASH_CACHE"), *base;
	struct stat st;
	int n;

	if (env && !strcmp(env, "0"))
		return -1;
	if (env && *env)
		n = snprintf(out, len, "%s", env);
	else if ((base = getenv("XDG_CACHE_HOME")) && *base == '/')
		n = snprintf(out, len, "%s/remote-gpu", base);
	else if ((base = getenv("HOME")) && *base == '/') {
		char parent[PATH_MAX];
		snprintf(parent, sizeof(parent), "%s/.cache", base);
		(void)mkdir(parent, 0700);
		n = snprintf(out, len, "%s/.cache/remote-gpu", base);
	} else
		return -1;
	if (n < 0 || (size_t)n >= len)
		return -1;
	if (mkdir(out, 0700) != 0 && errno != EEXIST)
		return -1;
	/* Another user's folder, or one others may write to, could feed us names. */
	if (lstat(out, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077)) {
		rg_log_once("frontend", "the image hash cache folder is not the user's own with mode 0700: not used",
			    out);
		return -1;
	}
	return 0;
}

/* The device and inode of the file mapped at addr, from /proc/self/maps. */
static int mapped_file(const void *addr, dev_t *dev, ino_t *ino)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[PATH_MAX + 128];
	int found = -1;

	if (!f)
		return -1;
	while (found < 0 && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, maj, min;
		unsigned long long inode;
		if (sscanf(line, "%lx-%lx %*s %*s %lx:%lx %llu", &lo, &hi, &maj, &min, &inode) == 5 &&
		    (uintptr_t)addr >= lo && (uintptr_t)addr < hi) {
			*dev = makedev(maj, min);
			*ino = (ino_t)inode;
			found = inode ? 0 : -1;
			break;
		}
	}
	fclose(f);
	return found;
}

static hc_file *file_open(const char *name, const void *addr)
{
	char dir[PATH_MAX];
	struct stat st;
	dev_t dev;
	ino_t ino;
	hc_file *f;

	for (f = files; f; f = f->next)
		if (!strcmp(f->name, name))
			return f;
	if (!(f = calloc(1, sizeof(*f))))
		return NULL;
	snprintf(f->name, sizeof(f->name), "%s", name);
	if (cache_dir(dir, sizeof(dir)) == 0 && stat(name, &st) == 0 && S_ISREG(st.st_mode) &&
	    mapped_file(addr, &dev, &ino) == 0 && dev == st.st_dev && ino == st.st_ino &&
	    (size_t)snprintf(f->cache, sizeof(f->cache), "%s/v1-%llx-%llx-%llx-%llx.%09ld", dir,
			     (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
			     (unsigned long long)st.st_size, (unsigned long long)st.st_mtim.tv_sec,
			     st.st_mtim.tv_nsec) < sizeof(f->cache))
		file_load(f);
	else
		f->cache[0] = 0;
	f->next = files;
	files = f;
	return f;
}

static void file_load(hc_file *f)
{
	FILE *in = fopen(f->cache, "re");
	char line[256];

	if (!in)
		return;
	while (fgets(line, sizeof(line), in)) {
		unsigned long long off, size;
		char hash[CUBIN_HASH_HEX + 1];
		if (sscanf(line, "%llu %llu %65s", &off, &size, hash) != 3 || !cubin_hash_valid(hash, strlen(hash)))
			continue;
		hc_entry *e = entry_find(f, off, (size_t)size);
		if (e)
			memcpy(e->hash, hash, CUBIN_HASH_HEX); /* the last line wins */
		else if (entry_put(f, off, (size_t)size, hash) != 0)
			break;
	}
	fclose(in);
}

static hc_entry *entry_find(hc_file *f, uint64_t off, size_t size)
{
	for (size_t i = 0; i < f->n; i++)
		if (f->e[i].off == off && f->e[i].size == size)
			return &f->e[i];
	return NULL;
}

static int entry_put(hc_file *f, uint64_t off, size_t size, const char *hash)
{
	if (f->n == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 64;
		hc_entry *e = realloc(f->e, cap * sizeof(*e));
		if (!e)
			return -1;
		f->e = e;
		f->cap = cap;
	}
	f->e[f->n] = (hc_entry){off, size, ""};
	memcpy(f->e[f->n].hash, hash, CUBIN_HASH_HEX);
	f->n++;
	return 0;
}

/* The library file an image lies in, read-only, with its offset; NULL if none
 * (heap copies, writable data). Called with mu held. */
static hc_file *where_is(const void *data, size_t size, uint64_t *off)
{
	hc_where w = {.data = data, .size = size};

	dl_iterate_phdr(find_segment, &w);
	if (!w.found || w.writable)
		return NULL;
	*off = w.off;
	return file_open(w.name, data);
}

void fe_hashcache_get(const void *data, size_t size, char out[CUBIN_HASH_HEX])
{
	uint64_t off = 0;
	hc_file *f;
	hc_entry *e;

	pthread_mutex_lock(&mu);
	f = where_is(data, size, &off);
	if (f && f->cache[0] && (e = entry_find(f, off, size))) {
		memcpy(out, e->hash, CUBIN_HASH_HEX);
		pthread_mutex_unlock(&mu);
		return;
	}
	pthread_mutex_unlock(&mu);

	cubin_hash(data, size, out); /* unlocked: other threads' lookups go on */

	pthread_mutex_lock(&mu);
	if (f && f->cache[0]) {
		char line[128];
		int len = snprintf(line, sizeof(line), "%llu %llu %s\n", (unsigned long long)off,
				   (unsigned long long)size, out);
		int fd = open(f->cache, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		/* One write of a short line: appends of concurrent programs never mix. */
		if (fd >= 0) {
			if (write(fd, line, (size_t)len) != len)
				LOG_DEBUG("frontend", "image hash cache %s: cannot append", f->cache);
			close(fd);
		}
		if ((e = entry_find(f, off, size)))
			memcpy(e->hash, out, CUBIN_HASH_HEX);
		else
			(void)entry_put(f, off, size, out);
	}
	pthread_mutex_unlock(&mu);
}

int fe_hashcache_forget(const void *data, size_t size)
{
	uint64_t off = 0;
	hc_file *f;
	hc_entry *e;
	int had = 0;

	pthread_mutex_lock(&mu);
	if ((f = where_is(data, size, &off)) && (e = entry_find(f, off, size))) {
		*e = f->e[--f->n];
		had = 1;
	}
	pthread_mutex_unlock(&mu);
	return had;
}
