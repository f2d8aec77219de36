/*
 * Prints the parameter layouts that params.cu's kernels must have, computed by
 * the host compiler from structs with the same members in the same order:
 *     kernel ordinal@offset:size ...
 * one kernel per line, the format of `remote-cubin ls`.
 */
#include <cstddef>
#include <cstdio>

#include "params.h"

#define MEMBER(t, n) t n;
#define DEFINE_STRUCT(name, LIST) struct name##_args { LIST(MEMBER, ) };
KERNELS(DEFINE_STRUCT)

#define PRINT_PARAM(t, n) std::printf(" %d@%zu:%zu", ord++, offsetof(A, n), sizeof(((A *)0)->n));
#define PRINT_KERNEL(name, LIST)                  \
	{                                         \
		typedef name##_args A;            \
		int ord = 0;                      \
		std::printf("%s", #name);         \
		LIST(PRINT_PARAM, )               \
		std::printf("\n");                \
	}

int main()
{
	KERNELS(PRINT_KERNEL)
	std::printf("knone\n");
	return 0;
}
