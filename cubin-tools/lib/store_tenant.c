/*
 * Per-tenant upload accounting in the cubin store (DIR/tenants/<id>, layout in
 * cubin_store.h). Images that clients upload land in the shared store, so a
 * tenant could fill the disk; each tenant's file lists what it uploaded, and a
 * new upload is recorded only while the sum stays within its quota.
 *
 * The file is append-only and locked with flock() on itself (it is never
 * renamed, so the lock holds the inode that every writer opens). The folder is
 * mode 0700: the ids are hashes of tokens, of use to nobody else.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cubin_store.h"

#define TENANTS_NAME "tenants"

static int tenant_open(const char *dir, const char *tenant, int create);
static int sum_file(int fd, uint64_t *bytes);

/* DIR/tenants/<tenant>, opened for reading and appending; -1 with errno. */
static int tenant_open(const char *dir, const char *tenant, int create)
{
	char path[4096];

	for (const char *t = tenant; *t; t++)
		if (!((*t >= '0' && *t <= '9') || (*t >= 'a' && *t <= 'z') || *t == '-' || *t == '_')) {
			errno = EINVAL;
			return -1;
		}
	if (!*tenant || (size_t)snprintf(path, sizeof(path), "%s/" TENANTS_NAME, dir) >= sizeof(path)) {
		errno = EINVAL;
		return -1;
	}
	if (create && mkdir(path, 0700) != 0 && errno != EEXIST)
		return -1;
	if ((size_t)snprintf(path, sizeof(path), "%s/" TENANTS_NAME "/%s", dir, tenant) >= sizeof(path)) {
		errno = EINVAL;
		return -1;
	}
	return open(path, O_RDWR | O_APPEND | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
}

/* The sum of the sizes in a tenant's file (lines "<hash> <size>"). */
static int sum_file(int fd, uint64_t *bytes)
{
	int dfd = dup(fd);
	FILE *f = dfd >= 0 ? fdopen(dfd, "r") : NULL;
	char line[256];
	uint64_t sum = 0;

	if (!f) {
		if (dfd >= 0)
			close(dfd);
		return CUBIN_EIO;
	}
	rewind(f);
	while (fgets(line, sizeof(line), f)) {
		char *sp = strchr(line, ' ');
		if (sp && cubin_hash_valid(line, (size_t)(sp - line)))
			sum += strtoull(sp + 1, NULL, 10);
	}
	fclose(f);
	*bytes = sum;
	return CUBIN_OK;
}

int cubin_store_tenant_usage(const char *dir, const char *tenant, uint64_t *bytes)
{
	int fd = tenant_open(dir, tenant, 0), rc;

	*bytes = 0;
	if (fd < 0)
		return errno == ENOENT ? CUBIN_OK : CUBIN_EIO;
	while (flock(fd, LOCK_SH) != 0 && errno == EINTR)
		;
	rc = sum_file(fd, bytes);
	close(fd);
	return rc;
}

int cubin_store_tenant_charge(const char *dir, const char *tenant, const char *hash, uint64_t size, uint64_t quota)
{
	char line[CUBIN_HASH_HEX + 32];
	uint64_t used = 0;
	int fd, rc, len;

	if (!cubin_hash_valid(hash, strnlen(hash, CUBIN_HASH_HEX)))
		return CUBIN_EFORMAT;
	if ((fd = tenant_open(dir, tenant, 1)) < 0)
		return CUBIN_EIO;
	while (flock(fd, LOCK_EX) != 0) {
		if (errno != EINTR) {
			close(fd);
			return CUBIN_EIO;
		}
	}
	rc = sum_file(fd, &used);
	if (rc == CUBIN_OK && (size > quota || used > quota - size))
		rc = 0;
	else if (rc == CUBIN_OK) {
		len = snprintf(line, sizeof(line), "%s %llu\n", hash, (unsigned long long)size);
		rc = write(fd, line, (size_t)len) == len ? 1 : CUBIN_EIO;
	}
	close(fd); /* drops the lock */
	return rc;
}
