/*
 * mps.c: the driver's side of CUDA MPS, as far as a test can see it.
 *
 * The real driver, at cuInit, tries to reach an MPS control daemon through
 * CUDA_MPS_PIPE_DIRECTORY (default /tmp/nvidia-mps); if it cannot, the
 * program runs without MPS, silently. If it can, the process is an MPS
 * client: CU_DEVICE_ATTRIBUTE_MPS_ENABLED reads 1, and the MPS server logs
 * the client's priority (CUDA_MPS_CLIENT_PRIORITY) from its environment.
 *
 * Here: cuInit connects to the unix socket DIR/control (what the test's
 * control daemon, tests/backend/fake-mps-control, listens on) and closes it;
 * connected, fk_mps is 1 and a line "client PID priority P threads T" (the
 * environment's CUDA_MPS_CLIENT_PRIORITY and CUDA_MPS_ACTIVE_THREAD_PERCENTAGE,
 * "-" when unset) is appended to DIR/fake-clients.log, as the MPS server's
 * log would have it. No scheduling is emulated.
 */
#include "fake.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int fk_mps;

void fk_mps_init(void)
{
	const char *dir = getenv("CUDA_MPS_PIPE_DIRECTORY");
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (!dir || !*dir)
		dir = "/tmp/nvidia-mps";
	if (snprintf(a.sun_path, sizeof(a.sun_path), "%s/control", dir) >= (int)sizeof(a.sun_path))
		return;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	int ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	if (!ok)
		return;
	fk_mps = 1;
	char path[4200];
	snprintf(path, sizeof(path), "%s/fake-clients.log", dir);
	int lf = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (lf < 0)
		return;
	const char *pr = getenv("CUDA_MPS_CLIENT_PRIORITY"), *th = getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
	dprintf(lf, "client %d priority %s threads %s\n", (int)getpid(), pr ? pr : "-", th ? th : "-");
	close(lf);
}
