/*
 * cuBLAS and cuBLASLt on the client: the state the client keeps per object to
 * know how scalars travel, and the helpers api/cublas.api's size expressions
 * call (lib_cublas.c). The generated entry points (gen/lib_cublas.c) include this.
 *
 * Object state words (lib.h: fe_lib_state):
 *   cublasHandle_t        0: pointer mode (cublasSetPointerMode), 1: math mode,
 *                         2: the cudaStream_t of cublasSetStream
 *   cublasLtMatmulDesc_t  0: scale type (create, CUBLASLT_MATMUL_DESC_SCALE_TYPE),
 *                         1: CUBLASLT_MATMUL_DESC_POINTER_MODE
 * Their zero values are the libraries' defaults (host pointers, default math,
 * the NULL stream, CUDA_R_32F).
 */
#ifndef FE_LIB_CUBLAS_H
#define FE_LIB_CUBLAS_H

#include <stddef.h>
#include <stdint.h>

#include "lib.h"
#include "lib_cublas_gen.h"

/* Bytes of one value of a data type (CUDA_R_32F: 4, CUDA_C_64F: 16). */
size_t fe_cublas_dtype_size(cudaDataType t);
/* Bytes of alpha/beta of cublasGemmEx and the like: the compute type's scalar,
 * complex when C is. */
size_t fe_cublas_compute_size(cublasComputeType_t compute, cudaDataType ctype);
/* Bytes of alpha/beta of cublasLtMatmul: the descriptor's scale type. */
size_t fe_cublas_lt_scale_size(uint64_t desc);

#endif
