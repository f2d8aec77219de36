/*
 * The move from tcp to shm:// for a program on the server's host.
 *
 * A REMOTE_GPU entry without a scheme ("host:port") is tcp; a server started
 * with --shm-offer PATH answers the hello of a tcp client from loopback (the
 * same network namespace: this host, or a container sharing its network)
 * with that socket's path and its instance id. The client then opens
 * shm://PATH and says hello there: if it can reach the socket (same files,
 * same user: the server refuses other uids) and the server that answers
 * gives the same instance id (not another server's socket at the same path
 * in this mount namespace), the new session takes the devices' place and
 * the tcp session is closed; otherwise the tcp session stays, and the log
 * says why at info level. "tcp://host:port" is never moved.
 *
 * Cost: a second session start (the tcp one already made its contexts on
 * the server), once per program.
 */
#include <stdlib.h>
#include <string.h>

#include "rg_log.h"
#include "rt.h"


/* Views first, the channel (device 0's) last. */
static void close_devices(fe_device *d, int n)
{
	for (int k = n - 1; k >= 0; k--)
		if (d[k].conn) {
			fe_conn_close(d[k].conn);
			d[k].conn = NULL;
		}
}

void fe_upgrade_shm(fe_device *d, int max, int *n, const fe_hello_offer *o, fe_hostfn_cb hostfn)
{
	char spec[sizeof(o->shm_path) + 8];
	fe_device *x = calloc((size_t)max, sizeof(*x));
	int m = 0;
	const char *why = NULL;
	snprintf(spec, sizeof(spec), "shm://%s", o->shm_path);
	if (!x)
		return;
	if (!o->has_instance)
		why = "the server gave no instance id";
	else if (transport_parse_addr(spec, &x[0].addr) != TRANSPORT_OK)
		why = "not a socket path";
	else if (fe_conn_open(&x[0].addr, hostfn, d, &x[0].conn) != 0)
		why = "cannot connect";
	if (!why) {
		fe_hello_offer again;
		if (fe_hello(x, max, &m, &again) != cudaSuccess)
			why = "its handshake failed";
		else if (m != *n || !again.has_instance || memcmp(again.instance, o->instance, sizeof(o->instance)))
			why = "another server answers there";
	}
	if (why) {
		LOG_INFO("frontend", "%s offers %s: %s; staying on tcp", fe_conn_peer(d[0].conn), spec, why);
		close_devices(x, m ? m : 1);
		free(x);
		return;
	}
	LOG_INFO("frontend", "%s: on this host, moved to %s", fe_conn_peer(d[0].conn), spec);
	close_devices(d, *n);
	memcpy(d, x, (size_t)m * sizeof(*d));
	free(x);
}
