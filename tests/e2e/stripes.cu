/*
 * stripes: copies striped across extra tcp connections (frontend/src/stripe.c),
 * run by stripes.sh with small settings (REMOTE_GPU_STRIPES=3,
 * REMOTE_GPU_STRIPE_MIN=64 KiB, REMOTE_GPU_STRIPE_KB=64) so that every
 * boundary is crossed at small sizes.
 *
 *   stripes copies   H2D then D2H, pageable and pinned, at sizes around the
 *                    threshold, the split into three parts and the 64 KiB
 *                    pieces, and jumps to 9 and 21 MiB, at unaligned offsets:
 *                    exact bytes, nothing written around the destination
 *   stripes burst    large H2D copies back to back (overlapping on the
 *                    server), at 9 then 21 MiB, each read back exact
 *   stripes kill     shuts one of its own stripe sockets down: the next large
 *                    copy fails (cudaErrorOperatingSystem), the ones after it
 *                    take the main connection and are exact again
 */
#include <arpa/inet.h>
#include <sys/socket.h>

#include "rgtest.h"

#define KiB 1024ull

static void one(const char *kind, size_t n, int off, int pinned, uint64_t seed)
{
	unsigned char *src, *dst, *d;
	if (pinned) {
		CK(cudaMallocHost(&src, n + 16));
		CK(cudaMallocHost(&dst, n + 16));
	} else {
		src = (unsigned char *)malloc(n + 16);
		dst = (unsigned char *)malloc(n + 16);
	}
	CK(cudaMalloc(&d, n + 16));
	rg_pattern(src, n + 16, seed);
	memset(dst, 0xEE, n + 16);
	CK(cudaMemcpy(d + off, src + off, n, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(dst + off + 1, d + off, n, cudaMemcpyDeviceToHost));
	char label[96];
	snprintf(label, sizeof label, "%s %s size=%zu off=%d", kind, pinned ? "pinned" : "pageable", n, off);
	rg_check_bytes(label, dst + off + 1, src + off, n);
	REQUIRE(dst[off] == 0xEE && dst[off + 1 + n] == 0xEE, "%s: wrote outside dst", label);
	CK(cudaFree(d));
	if (pinned) {
		CK(cudaFreeHost(src));
		CK(cudaFreeHost(dst));
	} else {
		free(src);
		free(dst);
	}
}

static void copies(void)
{
	/* threshold 64 KiB; 3 parts; pieces of 64 KiB */
	static const size_t sizes[] = {64 * KiB - 1, 64 * KiB, 64 * KiB + 1, 192 * KiB - 1, 192 * KiB,
				       192 * KiB + 2, 3 * 1024 * KiB + 7, 9 * 1024 * KiB, 21 * 1024 * KiB + 5};
	for (int pinned = 0; pinned < 2; pinned++)
		for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
			one("h2d+d2h", sizes[i], (int)(i % 3), pinned, 100 + i);
}

/* Large H2D copies back to back, then each read back: the next transfer's
 * bytes arrive while the server still copies the last one's to the device,
 * so they land in another staging buffer (the second big one, or the first
 * once it is idle again). Called at 9 MiB, then at 21 MiB: the jump in size
 * regrows the server's big buffers while copies are on their way. */
static void burst(size_t n)
{
	enum { N = 4 };
	unsigned char *src[N], *dst = (unsigned char *)malloc(n), *d[N];
	for (int i = 0; i < N; i++) {
		src[i] = (unsigned char *)malloc(n + 8);
		rg_pattern(src[i], n + 8, 200 + i);
		CK(cudaMalloc(&d[i], n + 8));
	}
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < N; i++)
			CK(cudaMemcpy(d[i] + i, src[i] + (i + round) % 8, n, cudaMemcpyHostToDevice));
	for (int i = 0; i < N; i++) {
		char label[64];
		memset(dst, 0, n);
		CK(cudaMemcpy(dst, d[i] + i, n, cudaMemcpyDeviceToHost));
		snprintf(label, sizeof label, "burst h2d %d size=%zu off=%d", i, n, i);
		rg_check_bytes(label, dst, src[i] + (i + 1) % 8, n);
		CK(cudaFree(d[i]));
		free(src[i]);
	}
	free(dst);
}

/* Shuts down (both ways) one connected tcp socket of this process whose peer
 * port is not the main connection's: a stripe. */
static int kill_a_stripe(int main_port)
{
	for (int fd = 3; fd < 1024; fd++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int type = 0;
		socklen_t tl = sizeof(type);
		if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_STREAM)
			continue;
		if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0 || ss.ss_family != AF_INET)
			continue;
		int port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
		if (port != main_port) {
			shutdown(fd, SHUT_RDWR);
			return 1;
		}
	}
	return 0;
}

static void kill_one(void)
{
	const size_t n = 3 * 1024 * KiB + 5;
	unsigned char *src = (unsigned char *)malloc(n), *dst = (unsigned char *)malloc(n), *d;
	CK(cudaMalloc(&d, n));
	rg_pattern(src, n, 7);
	CK(cudaMemcpy(d, src, n, cudaMemcpyHostToDevice)); /* the stripes are open now */
	/* ... and the server has every byte: a stripe dying while they are on
	 * their way fails that copy too (latched), which is not this test's */
	CK(cudaDeviceSynchronize());
	const char *e = getenv("REMOTE_GPU");
	const char *colon = e ? strrchr(e, ':') : NULL;
	REQUIRE(colon && kill_a_stripe(atoi(colon + 1)), "no stripe socket found");
	cudaError_t r = cudaMemcpy(d, src, n, cudaMemcpyHostToDevice);
	printf("copy with a stripe shut down: %s\n", cudaGetErrorName(r));
	REQUIRE(r == cudaErrorOperatingSystem, "expected cudaErrorOperatingSystem, got %s", cudaGetErrorName(r));
	cudaGetLastError();
	/* later copies take the main connection */
	rg_pattern(src, n, 8);
	CK(cudaMemcpy(d, src, n, cudaMemcpyHostToDevice));
	memset(dst, 0, n);
	CK(cudaMemcpy(dst, d, n, cudaMemcpyDeviceToHost));
	rg_check_bytes("after the stripe died", dst, src, n);
	CK(cudaDeviceSynchronize());
	CK(cudaFree(d));
	free(src);
	free(dst);
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "copies";
	if (!strcmp(what, "kill"))
		kill_one();
	else if (!strcmp(what, "burst")) {
		burst(9 * 1024 * KiB + 3);
		burst(21 * 1024 * KiB + 5);
	} else
		copies();
	return rg_finish("stripes");
}
