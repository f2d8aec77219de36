/*
 * fakecuda: device memory charged, per process or shared between processes.
 *
 * On a real GPU the processes that use it share its memory: what one holds,
 * the others cannot have. Each process of the fake has devices of its own, so
 * by default one's allocations leave the others' free memory as it was. With
 * FAKECUDA_MEM_SHARED=FILE every process that names the file counts its
 * charges in it too (one counter per device), and the free memory every
 * allocation is checked against is the total less the file's count: the
 * server's session processes then run out of memory together, as they would
 * on one GPU. The check and the charge are two steps, so two processes
 * allocating at the same instant may both pass; tests do not race that way.
 * A process that dies holding memory leaves it counted.
 */
#include "fake.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

void fk_devshare_init(void)
{
	const char *path = getenv("FAKECUDA_MEM_SHARED");
	size_t len = sizeof(unsigned long long) * FK_MAX_DEVICES;
	if (!path || !*path)
		return;
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	void *m = MAP_FAILED;
	if (fd >= 0 && (lseek(fd, 0, SEEK_END) >= (off_t)len || ftruncate(fd, (off_t)len) == 0))
		m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (fd >= 0)
		close(fd);
	if (m == MAP_FAILED) {
		fprintf(stderr, "fakecuda: FAKECUDA_MEM_SHARED=%s: cannot map it; memory is this process's\n", path);
		return;
	}
	for (int i = 0; i < FK_MAX_DEVICES; i++)
		fk_devs[i].shared = (_Atomic unsigned long long *)m + i;
}

size_t fk_dev_free(const fk_dev *d)
{
	size_t used = d->shared ? (size_t)atomic_load(d->shared) : d->used;
	return used < d->total ? d->total - used : 0;
}

void fk_dev_charge(fk_dev *d, size_t n)
{
	d->used += n;
	if (d->shared)
		atomic_fetch_add(d->shared, n);
}

void fk_dev_uncharge(fk_dev *d, size_t n)
{
	d->used -= n;
	if (d->shared)
		atomic_fetch_sub(d->shared, n);
}
