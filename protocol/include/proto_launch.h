/*
 * The launch attributes a launch (and a cluster occupancy query) carries to the
 * server: plain values the server's driver takes as they are. Both ends ask
 * the same list, the client to refuse at the call, the server because it never
 * trusts the client. Others (access policy windows, events, memory maps) name
 * client state and are not supported.
 */
#ifndef PROTO_LAUNCH_H
#define PROTO_LAUNCH_H

#include <cuda.h>

static inline int proto_launch_attr_travels(int id)
{
	switch (id) {
	case CU_LAUNCH_ATTRIBUTE_IGNORE:
	case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
	case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
	case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
	case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
	case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
	case CU_LAUNCH_ATTRIBUTE_PRIORITY:
	case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
	case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
	case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
	case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
	case CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING:
		return 1;
	default:
		return 0;
	}
}

#endif
