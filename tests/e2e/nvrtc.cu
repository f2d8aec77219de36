/*
 * nvrtc: kernels compiled at run time, as CuPy, torch's jiterator and Triton's
 * launchers do: NVRTC compiles source to PTX and to a cubin, the driver API
 * (reached through dlopen("libcuda.so.1"), as those libraries do) loads and
 * launches them, and the runtime API moves the data.
 *
 * GPU suite only (tests/gpu/run.sh): the driver test double cannot run kernels
 * it does not know.
 *
 * rg-build-libs: -lnvrtc
 */
#include <dlfcn.h>

#include <cuda.h>
#include <nvrtc.h>

#include "rgtest.h"

static const char source[] =
	"extern \"C\" __global__ void saxpy(float a, const float *x, float *y, unsigned n)\n"
	"{\n"
	"    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
	"    if (i < n) y[i] = a * x[i] + y[i];\n"
	"}\n"
	"struct pair { int a; double b; };\n"
	"extern \"C\" __global__ void fill(pair p, char c, unsigned long long *out)\n"
	"{\n"
	"    out[threadIdx.x] = (unsigned long long)(p.a * 1000 + (int)p.b) + c + threadIdx.x;\n"
	"}\n";

#define NV(call)                                                                    \
	do {                                                                            \
		nvrtcResult nv_e_ = (call);                                                 \
		REQUIRE(nv_e_ == NVRTC_SUCCESS, "%s", nvrtcGetErrorString(nv_e_));          \
	} while (0)

typedef CUresult (*fn_init)(unsigned);
typedef CUresult (*fn_load)(CUmodule *, const void *);
typedef CUresult (*fn_get)(CUfunction *, CUmodule, const char *);
typedef CUresult (*fn_launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			      unsigned, CUstream, void **, void **);
typedef CUresult (*fn_unload)(CUmodule);
typedef CUresult (*fn_name)(CUresult, const char **);

static struct {
	fn_init init;
	fn_load load;
	fn_get get;
	fn_launch launch;
	fn_unload unload;
	fn_name name;
} cu;

static const char *cu_name(CUresult r)
{
	const char *s = "?";
	cu.name(r, &s);
	return s;
}

#define CU(call)                                                                    \
	do {                                                                            \
		CUresult cu_e_ = (call);                                                    \
		REQUIRE(cu_e_ == CUDA_SUCCESS, "%s", cu_name(cu_e_));                       \
	} while (0)

static void driver_open(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	REQUIRE(h, "dlopen libcuda.so.1: %s", dlerror());
	cu.init = (fn_init)dlsym(h, "cuInit");
	cu.load = (fn_load)dlsym(h, "cuModuleLoadData");
	cu.get = (fn_get)dlsym(h, "cuModuleGetFunction");
	cu.launch = (fn_launch)dlsym(h, "cuLaunchKernel");
	cu.unload = (fn_unload)dlsym(h, "cuModuleUnload");
	cu.name = (fn_name)dlsym(h, "cuGetErrorName");
	REQUIRE(cu.init && cu.load && cu.get && cu.launch && cu.unload && cu.name, "driver symbols");
}

/* Source -> PTX (target "compute_XY") or cubin ("sm_XY"). */
static char *compile(const char *arch, int cubin, size_t *size)
{
	nvrtcProgram prog;
	NV(nvrtcCreateProgram(&prog, source, "rt.cu", 0, NULL, NULL));
	char opt[64];
	snprintf(opt, sizeof(opt), "--gpu-architecture=%s", arch);
	const char *opts[] = {opt};
	nvrtcResult r = nvrtcCompileProgram(prog, 1, opts);
	if (r != NVRTC_SUCCESS) {
		size_t n = 0;
		nvrtcGetProgramLogSize(prog, &n);
		char *log = (char *)malloc(n + 1);
		nvrtcGetProgramLog(prog, log);
		fprintf(stderr, "nvrtc: %s\n", log);
		exit(1);
	}
	char *out;
	if (cubin) {
		NV(nvrtcGetCUBINSize(prog, size));
		out = (char *)malloc(*size);
		NV(nvrtcGetCUBIN(prog, out));
	} else {
		NV(nvrtcGetPTXSize(prog, size));
		out = (char *)malloc(*size);
		NV(nvrtcGetPTX(prog, out));
	}
	nvrtcDestroyProgram(&prog);
	return out;
}

static void run_image(const char *what, const char *image)
{
	const unsigned n = 100003;
	float *hx = (float *)malloc(n * sizeof(float)), *hy = (float *)malloc(n * sizeof(float));
	for (unsigned i = 0; i < n; i++) {
		hx[i] = (float)(i % 977) * 0.5f;
		hy[i] = (float)(i % 13);
	}
	float *dx, *dy;
	unsigned long long *dout, hout[64];
	CK(cudaMalloc(&dx, n * sizeof(float)));
	CK(cudaMalloc(&dy, n * sizeof(float)));
	CK(cudaMalloc(&dout, sizeof(hout)));
	CK(cudaMemcpy(dx, hx, n * sizeof(float), cudaMemcpyHostToDevice));
	CK(cudaMemcpy(dy, hy, n * sizeof(float), cudaMemcpyHostToDevice));

	CUmodule mod;
	CUfunction saxpy, fill, none;
	CU(cu.load(&mod, image));
	CU(cu.get(&saxpy, mod, "saxpy"));
	CU(cu.get(&fill, mod, "fill"));
	CUresult r = cu.get(&none, mod, "no_such_kernel");
	printf("%s: unknown kernel -> %s\n", what, cu_name(r));

	float a = 3.0f;
	void *args[] = {&a, &dx, &dy, (void *)&n};
	CU(cu.launch(saxpy, (n + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
	struct {
		int a;
		double b;
	} p = {7, 42.75};
	char c = 5;
	void *fargs[] = {&p, &c, &dout};
	CU(cu.launch(fill, 1, 1, 1, 64, 1, 1, 0, NULL, fargs, NULL));
	CK(cudaMemcpy(hy, dy, n * sizeof(float), cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(hout, dout, sizeof(hout), cudaMemcpyDeviceToHost));
	double sum = 0;
	for (unsigned i = 0; i < n; i++)
		sum += hy[i];
	unsigned long long osum = 0;
	for (int i = 0; i < 64; i++)
		osum += hout[i];
	printf("%s: saxpy sum %.1f y[12345] %.2f fill sum %llu first %llu\n", what, sum, hy[12345], osum,
	       hout[0]);
	CU(cu.unload(mod));
	CK(cudaDeviceSynchronize());
	CK(cudaFree(dx));
	CK(cudaFree(dy));
	CK(cudaFree(dout));
	free(hx);
	free(hy);
}

int main(void)
{
	driver_open();
	CU(cu.init(0));
	int major = 0, minor = 0;
	CK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
	CK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0));
	char arch[32];
	size_t size;

	snprintf(arch, sizeof(arch), "compute_%d%d", major, minor);
	char *ptx = compile(arch, 0, &size);
	run_image("ptx", ptx);
	free(ptx);

	snprintf(arch, sizeof(arch), "sm_%d%d", major, minor);
	char *cubin = compile(arch, 1, &size);
	run_image("cubin", cubin);
	free(cubin);
	return rg_finish("nvrtc");
}
