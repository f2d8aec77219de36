/*
 * Kernel signatures for the layout tests, written once and expanded twice:
 * into __global__ functions by params.cu (nvcc), and into plain structs by
 * expected_layout.cpp (the host C++ compiler), whose offsetof/sizeof are the
 * expected (offset, size) of each parameter. Kernel parameters are laid out
 * like the fields of a struct in declaration order, each at its type's
 * alignment; remote-cubin must read the same numbers out of .nv.info.
 *
 * LIST(F, SEP) expands to F(type, name) items separated by SEP.
 * No __half or long double: their host and device rules differ.
 */
#ifndef CUBIN_TEST_PARAMS_H
#define CUBIN_TEST_PARAMS_H

#include <stdint.h>
#include <vector_types.h> /* float4, double2: 16-byte aligned on host and device */

struct S1 { char c; double d; short s; };             /* 24: padding inside and at the end */
struct Big { int a[100]; };                           /* 400: array by value */
struct alignas(16) A16 { char c; };                   /* 16 */
struct E {};                                          /* 1 in C++ */
struct Nest { char a; struct { double x; char y; } in; short z; };
struct D3 { double d[3]; };
struct Odd { char c[3]; };                            /* size 3, alignment 1 */
struct Mid { char c[3000]; };                         /* total under 4 KiB: EIATTR_KPARAM_INFO */
struct P5000 { char a[5000]; };                       /* total over 4 KiB: EIATTR_KPARAM_INFO_V2 */
struct P32000 { char a[32000]; };                     /* near the 32764-byte limit */

#define COMMA ,

#define K_MIX(F, S) F(char, a) S F(short, b) S F(double, c) S F(S1, s) S F(int *, p) \
	S F(Big, big) S F(float, f)
#define K_VEC(F, S) F(float4, f) S F(double2, d) S F(A16, a) S F(E, e) S F(bool, b) \
	S F(long long, ll) S F(const int *, cp) S F(int *, o)
#define K_INTS(F, S) F(uint8_t, u8) S F(uint16_t, u16) S F(uint32_t, u32) S F(uint64_t, u64) \
	S F(int8_t, i8) S F(uint16_t, u16b) S F(char, c)
#define K_NEST(F, S) F(char, c) S F(Nest, n) S F(Odd, o) S F(D3, d3) \
	S F(Odd, o2) S F(float, f)
#define K_MID(F, S) F(char, c) S F(Mid, m) S F(double, d) S F(int *, o)
#define K_V2(F, S) F(char, c) S F(P5000, h) S F(short, s) S F(int *, o)
#define K_HUGE(F, S) F(P32000, h) S F(char, c) S F(double *, o)
#define K_ONE(F, S) F(double, d)

/* X(name, LIST) for every kernel; knone (no parameters) is written out in params.cu. */
#define KERNELS(X) X(kmix, K_MIX) X(kvec, K_VEC) X(kints, K_INTS) X(knest, K_NEST) \
	X(kmid, K_MID) X(kv2, K_V2) X(khuge, K_HUGE) X(kone, K_ONE)

#endif
